#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::io {

namespace {

// Real headers are a few MB at most (DeepSeek-V3 shards: ~100 KB); anything near this is corrupt.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

using nlohmann::json;

TensorInfo parseEntry(const std::string& where, const std::string& name, const json& entry) {
    auto fail = [&](const std::string& what) -> Error {
        return Error(where + ": tensor '" + name + "': " + what);
    };
    if (!entry.is_object()) throw fail("header entry is not an object");
    TensorInfo t;
    t.name = name;

    const auto dtypeIt = entry.find("dtype");
    if (dtypeIt == entry.end() || !dtypeIt->is_string()) throw fail("missing 'dtype'");
    const auto dtype = dtypeFromName(dtypeIt->get<std::string>());
    if (!dtype) throw fail("unsupported dtype '" + dtypeIt->get<std::string>() + "'");
    t.dtype = *dtype;

    const auto shapeIt = entry.find("shape");
    if (shapeIt == entry.end() || !shapeIt->is_array()) throw fail("missing 'shape'");
    for (const auto& d : *shapeIt) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
            throw fail("shape has a dimension that is not a non-negative integer");
        t.shape.push_back(d.get<std::int64_t>());
    }

    const auto offIt = entry.find("data_offsets");
    if (offIt == entry.end() || !offIt->is_array() || offIt->size() != 2 || !(*offIt)[0].is_number_unsigned() ||
        !(*offIt)[1].is_number_unsigned())
        throw fail("'data_offsets' must be two non-negative integers");
    t.begin = (*offIt)[0].get<std::uint64_t>();
    t.end = (*offIt)[1].get<std::uint64_t>();
    if (t.end < t.begin) throw fail("'data_offsets' end before they begin");

    // numel * element size, refusing shapes whose byte count overflows.
    std::uint64_t bytes = dtypeSize(t.dtype);
    for (const auto d : t.shape) {
        if (d != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d))
            throw fail("shape " + t.shapeString() + " is too large");
        bytes *= static_cast<std::uint64_t>(d);
    }
    if (t.end - t.begin != bytes)
        throw fail("shape " + t.shapeString() + " of " + std::string(dtypeName(t.dtype)) + " needs " +
                   std::to_string(bytes) + " bytes but 'data_offsets' span " + std::to_string(t.end - t.begin));
    return t;
}

}  // namespace

std::int64_t TensorInfo::numel() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
}

std::string TensorInfo::shapeString() const {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path) {
    const std::string where = path.string();
    const auto bytes = file_.bytes();
    if (bytes.size() < 8)
        throw Error(where + ": not a safetensors file (only " + std::to_string(bytes.size()) + " bytes)");
    std::uint64_t headerLen = 0;
    for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | static_cast<std::uint8_t>(bytes[i]);
    if (headerLen > kMaxHeaderBytes || headerLen > bytes.size() - 8)
        throw Error(where + ": header length " + std::to_string(headerLen) + " runs past the end of the " +
                    std::to_string(bytes.size()) + "-byte file (truncated or not a safetensors file)");
    dataStart_ = 8 + headerLen;

    json header;
    try {
        header = parseJson<json>(std::string_view(reinterpret_cast<const char*>(bytes.data() + 8), headerLen),
                                 where + "'s header");
    } catch (const json::exception& e) {
        throw Error(where + ": the header is not valid JSON (" + e.what() + ")");
    }
    if (!header.is_object()) throw Error(where + ": the header is not a JSON object");

    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (entry.is_object())
                for (const auto& [k, v] : entry.items())
                    if (v.is_string()) metadata_[k] = v.get<std::string>();
            continue;
        }
        tensors_.push_back(parseEntry(where, name, entry));
    }

    const std::uint64_t dataSize = bytes.size() - dataStart_;
    std::vector<const TensorInfo*> byOffset;
    for (const auto& t : tensors_) {
        if (t.end > dataSize)
            throw Error(where + ": tensor '" + t.name + "' ends at byte " + std::to_string(t.end) +
                        " of the data section, which holds only " + std::to_string(dataSize) +
                        " bytes (the file is truncated; download it again)");
        byOffset.push_back(&t);
    }
    std::sort(byOffset.begin(), byOffset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (std::size_t i = 1; i < byOffset.size(); ++i) {
        const auto* prev = byOffset[i - 1];
        const auto* cur = byOffset[i];
        if (cur->begin < prev->end && cur->end > cur->begin && prev->end > prev->begin)
            throw Error(where + ": tensors '" + prev->name + "' and '" + cur->name + "' overlap in the file");
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) byName_[tensors_[i].name] = i;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    const auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::get(const std::string& name) const {
    if (const auto* t = find(name)) return *t;
    throw Error(path().string() + ": no tensor named '" + name + "'");
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
    return file_.bytes().subspan(dataStart_ + t.begin, t.end - t.begin);
}

}  // namespace tandem::io
