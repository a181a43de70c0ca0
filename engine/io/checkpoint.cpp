#include "io/checkpoint.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::io {

namespace fs = std::filesystem;

namespace {

// The shard file names of model.safetensors.index.json's weight_map, in first-seen order.
std::vector<std::string> readIndex(const fs::path& indexPath, std::map<std::string, std::string>& shardOf) {
    const std::string text = readRegularFile(indexPath);
    nlohmann::json index;
    try {
        index = parseJson<nlohmann::json>(text, indexPath.string());
    } catch (const nlohmann::json::exception& e) {
        throw Error(indexPath.string() + " is not valid JSON (" + e.what() + ")");
    }
    const auto map = index.find("weight_map");
    if (!index.is_object() || map == index.end() || !map->is_object())
        throw Error(indexPath.string() + " has no 'weight_map' object");
    std::vector<std::string> shards;
    for (const auto& [tensor, file] : map->items()) {
        if (!file.is_string()) throw Error(indexPath.string() + ": weight_map entry '" + tensor + "' is not a file name");
        const auto name = file.get<std::string>();
        if (name.find('/') != std::string::npos || name == "..")
            throw Error(indexPath.string() + ": weight_map names '" + name + "', which is not a file in the folder");
        shardOf[tensor] = name;
        if (std::find(shards.begin(), shards.end(), name) == shards.end()) shards.push_back(name);
    }
    return shards;
}

}  // namespace

Checkpoint::Checkpoint(const fs::path& dir) : dir_(dir) {
    if (!fs::is_directory(dir)) throw Error("model folder " + dir.string() + " does not exist");
    const fs::path indexPath = dir / "model.safetensors.index.json";
    const fs::path single = dir / "model.safetensors";
    if (fs::exists(indexPath)) {
        std::map<std::string, std::string> shardOf;
        const auto shardNames = readIndex(indexPath, shardOf);
        std::map<std::string, const SafetensorsFile*> byFile;
        for (const auto& name : shardNames) {
            const fs::path p = dir / name;
            if (!fs::exists(p))
                throw Error(indexPath.string() + " lists shard " + name + ", which is missing from " + dir.string());
            shards_.push_back(std::make_unique<SafetensorsFile>(p));
            byFile[name] = shards_.back().get();
        }
        for (const auto& [tensor, file] : shardOf) {
            const auto* shard = byFile.at(file);
            if (!shard->find(tensor))
                throw Error(indexPath.string() + " places tensor '" + tensor + "' in " + file +
                            ", but that shard does not contain it");
            where_[tensor] = shard;
        }
    } else if (fs::exists(single)) {
        shards_.push_back(std::make_unique<SafetensorsFile>(single));
        for (const auto& t : shards_.back()->tensors()) where_[t.name] = shards_.back().get();
    } else {
        throw Error(dir.string() + " holds neither model.safetensors nor model.safetensors.index.json");
    }
}

TensorRef Checkpoint::get(const std::string& name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw Error(dir_.string() + ": the checkpoint has no tensor '" + name + "'");
    const auto& info = it->second->get(name);
    return {it->second, &info, it->second->data(info)};
}

TensorView Checkpoint::view(const std::string& name) const {
    const TensorRef t = get(name);
    return {"tensor '" + name + "' in " + t.file->path().string(), t.info->dtype, t.info->shape, t.data.data()};
}

std::vector<std::string> Checkpoint::tensorNames() const {
    std::vector<std::string> names;
    names.reserve(where_.size());
    for (const auto& [name, file] : where_) names.push_back(name);
    return names;
}

std::uint64_t Checkpoint::totalBytes() const {
    std::uint64_t n = 0;
    for (const auto& s : shards_)
        for (const auto& t : s->tensors()) n += t.end - t.begin;
    return n;
}

}  // namespace tandem::io
