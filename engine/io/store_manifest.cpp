#include "io/store_manifest.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "io/output_file.h"
#include "io/store_checksum.h"
#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::io {

namespace {

using nlohmann::ordered_json;

constexpr const char* kFormatName = "tandem-packed-store";

nlohmann::json fileToJson(const StoreFile& f) {
    return {{"file", f.name}, {"bytes", f.bytes}, {"checksum", checksumText(f.checksum)}, {"piece_bytes", f.pieceBytes},
            {"head_checksum", checksumText(f.headChecksum)}};
}

// Field access with errors that name the manifest and the field.
class Reader {
public:
    explicit Reader(std::string where) : where_(std::move(where)) {}

    const nlohmann::json& field(const nlohmann::json& object, const char* key, const std::string& path) const {
        const auto it = object.find(key);
        if (it == object.end()) throw fail(path + key + " is missing");
        return *it;
    }
    std::int64_t integer(const nlohmann::json& object, const char* key, const std::string& path = "") const {
        const auto& v = field(object, key, path);
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0) throw fail(path + key + " must be a non-negative integer");
        return v.get<std::int64_t>();
    }
    std::string text(const nlohmann::json& object, const char* key, const std::string& path = "") const {
        const auto& v = field(object, key, path);
        if (!v.is_string()) throw fail(path + key + " must be a string");
        return v.get<std::string>();
    }
    std::uint64_t checksum(const nlohmann::json& object, const char* key, const std::string& path) const {
        const std::string s = text(object, key, path);
        std::uint64_t value = 0;
        for (const char c : s) {
            const int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            if (digit < 0 || s.size() != 16) throw fail(path + key + " must be 16 hex digits");
            value = (value << 4) | static_cast<std::uint64_t>(digit);
        }
        return value;
    }
    StoreFile file(const nlohmann::json& object, const std::string& path) const {
        if (!object.is_object()) throw fail(path + " must be an object");
        StoreFile f;
        f.name = text(object, "file", path + ".");
        if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." || f.name == "..")
            throw fail(path + ".file names '" + f.name + "', which is not a file of the store");
        f.bytes = static_cast<std::uint64_t>(integer(object, "bytes", path + "."));
        f.checksum = checksum(object, "checksum", path + ".");
        f.pieceBytes = static_cast<std::uint64_t>(integer(object, "piece_bytes", path + "."));
        if (f.pieceBytes == 0) throw fail(path + ".piece_bytes must be positive");
        f.headChecksum = checksum(object, "head_checksum", path + ".");
        return f;
    }
    Error fail(const std::string& what) const {
        return Error(where_ + ": " + what + "; the store is damaged, convert the model again");
    }

private:
    std::string where_;
};

}  // namespace

const StoreLayer* StoreManifest::findLayer(int layer) const {
    for (const auto& l : layers)
        if (l.layer == layer) return &l;
    return nullptr;
}

bool StoreManifest::sameConversion(const StoreManifest& o) const {
    return formatVersion == o.formatVersion && sourcePath == o.sourcePath && sourceFingerprint == o.sourceFingerprint &&
           expertType == o.expertType && hidden == o.hidden && inter == o.inter && experts == o.experts &&
           expertBytes == o.expertBytes && moeLayers == o.moeLayers && denseType == o.denseType;
}

std::string layerFileName(int layer) {
    char name[32];
    std::snprintf(name, sizeof name, "experts-%03d.bin", layer);
    return name;
}

std::string manifestToJson(const StoreManifest& m) {
    ordered_json j;
    j["format"] = kFormatName;
    j["format_version"] = m.formatVersion;
    j["converter"] = m.converter;
    j["complete"] = m.complete;
    j["source"] = {{"path", m.sourcePath}, {"fingerprint", checksumText(m.sourceFingerprint)}};
    j["experts"] = {{"type", io::expertTypeName(m.expertType)}, {"hidden", m.hidden}, {"inter", m.inter},
                    {"count", m.experts}, {"expert_bytes", m.expertBytes}};
    j["moe_layers"] = m.moeLayers;
    j["dense_type"] = m.denseType;
    j["dense"] = m.dense ? ordered_json(fileToJson(*m.dense)) : ordered_json(nullptr);
    ordered_json layers = ordered_json::array();
    for (const auto& l : m.layers) {
        ordered_json entry = {{"layer", l.layer}};
        entry.update(fileToJson(l.file));
        layers.push_back(entry);
    }
    j["layers"] = layers;
    return j.dump(2) + "\n";
}

StoreManifest manifestFromJson(const std::string& text, const std::string& where) {
    const Reader r(where);
    nlohmann::json j;
    try {
        j = parseJson<nlohmann::json>(text, where);
    } catch (const nlohmann::json::exception& e) {
        throw r.fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j.is_object() || r.text(j, "format") != kFormatName) throw r.fail("not a Tandem store manifest");
    StoreManifest m;
    m.formatVersion = static_cast<int>(r.integer(j, "format_version"));
    if (m.formatVersion != kStoreFormatVersion)
        throw Error(where + ": the store has format version " + std::to_string(m.formatVersion) +
                    ", this Tandem reads version " + std::to_string(kStoreFormatVersion) +
                    "; convert the model again with this version of tandem-cli");
    m.converter = r.text(j, "converter");
    const auto& complete = r.field(j, "complete", "");
    if (!complete.is_boolean()) throw r.fail("complete must be true or false");
    m.complete = complete.get<bool>();

    const auto& source = r.field(j, "source", "");
    if (!source.is_object()) throw r.fail("source must be an object");
    m.sourcePath = r.text(source, "path", "source.");
    m.sourceFingerprint = r.checksum(source, "fingerprint", "source.");

    const auto& experts = r.field(j, "experts", "");
    if (!experts.is_object()) throw r.fail("experts must be an object");
    const auto type = io::parseExpertType(r.text(experts, "type", "experts."));
    if (!type) throw r.fail("experts.type must be bf16, int8 or int4");
    m.expertType = *type;
    m.hidden = static_cast<int>(r.integer(experts, "hidden", "experts."));
    m.inter = static_cast<int>(r.integer(experts, "inter", "experts."));
    m.experts = static_cast<int>(r.integer(experts, "count", "experts."));
    m.expertBytes = static_cast<std::uint64_t>(r.integer(experts, "expert_bytes", "experts."));
    if (m.hidden <= 0 || m.inter <= 0 || m.experts <= 0 || m.expertBytes == 0)
        throw r.fail("the experts' dimensions, count and size must be positive");

    const auto& moeLayers = r.field(j, "moe_layers", "");
    if (!moeLayers.is_array()) throw r.fail("moe_layers must be an array");
    for (const auto& l : moeLayers) {
        if (!l.is_number_integer() || l.get<int>() < 0) throw r.fail("moe_layers must hold layer indices");
        m.moeLayers.push_back(l.get<int>());
    }

    if (j.contains("dense_type")) {
        m.denseType = r.text(j, "dense_type");
        if (m.denseType != "checkpoint" && m.denseType != "int8" && m.denseType != "bf16")
            throw r.fail("dense_type must be checkpoint, int8 or bf16");
    }
    const auto& dense = r.field(j, "dense", "");
    if (!dense.is_null()) m.dense = r.file(dense, "dense");

    const auto& layers = r.field(j, "layers", "");
    if (!layers.is_array()) throw r.fail("layers must be an array");
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const std::string path = "layers[" + std::to_string(i) + "]";
        StoreLayer l;
        l.file = r.file(layers[i], path);
        l.layer = static_cast<int>(r.integer(layers[i], "layer", path + "."));
        m.layers.push_back(l);
    }
    return m;
}

StoreManifest readManifest(const std::filesystem::path& dir) {
    const auto path = dir / kStoreManifestName;
    std::string text;
    try {
        text = readRegularFile(path);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + "; is " + dir.string() + " a Tandem store?");
    }
    return manifestFromJson(text, path.string());
}

void writeManifest(const std::filesystem::path& dir, const StoreManifest& manifest) {
    writeFileAtomically(dir / kStoreManifestName, manifestToJson(manifest));
}

}  // namespace tandem::io
