#include "io/compressed_tensors.h"

#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/dtype.h"
#include "tandem/error.h"

namespace tandem::io {

static_assert(std::endian::native == std::endian::little, "weight_packed's int32 words are read as little-endian bytes");

namespace {

using nlohmann::json;

// A field that is absent or null counts as not set, as in compressed-tensors' own pydantic models.
const json* field(const json& o, const char* key) {
    const auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string shown(const json* v) { return v ? v->dump() : std::string("missing"); }

// The weights of one config group: the only scheme read is 4-bit symmetric integers in groups of 32.
void checkWeights(const json& w, const std::string& where) {
    const auto unsupported = [&](const std::string& what) {
        throw Error(where + ": " + what + " is not supported; Tandem reads compressed-tensors weights that are 4-bit "
                                          "symmetric integers with one scale per group of 32 inputs (Kimi-K2-Thinking's "
                                          "scheme)");
    };
    if (!w.is_object()) unsupported("'weights' " + w.dump());
    const json* bits = field(w, "num_bits");
    if (!bits || !bits->is_number_integer() || bits->get<int>() != 4) unsupported("num_bits " + shown(bits));
    const json* type = field(w, "type");
    if (!type || *type != "int") unsupported("type " + shown(type));
    const json* symmetric = field(w, "symmetric");
    if (!symmetric || *symmetric != true) unsupported("asymmetric quantization (symmetric " + shown(symmetric) + ")");
    const json* strategy = field(w, "strategy");
    if (!strategy || *strategy != "group") unsupported("strategy " + shown(strategy));
    const json* group = field(w, "group_size");
    if (!group || !group->is_number_integer() || group->get<int>() != kPackedInt4Group)
        unsupported("group_size " + shown(group));
    if (const json* dynamic = field(w, "dynamic"); dynamic && *dynamic != false) unsupported("dynamic " + dynamic->dump());
    if (const json* order = field(w, "actorder"); order && *order != false)
        unsupported("activation ordering (actorder " + order->dump() + ")");
}

}  // namespace

CompressedTensorsScheme parseCompressedTensors(const json& q, const std::string& where) {
    if (!q.is_object()) throw Error(where + ": quantization_config must be an object");
    CompressedTensorsScheme scheme;
    const json* format = field(q, "format");
    const json* groups = field(q, "config_groups");
    if (!groups || !groups->is_object() || groups->empty())
        throw Error(where + ": compressed-tensors without 'config_groups' is not supported (nothing says how the "
                            "weights are quantized)");
    for (const auto& [name, group] : groups->items()) {
        const std::string at = where + " config_groups." + name;
        if (!group.is_object()) throw Error(at + " must be an object");
        const json* groupFormat = field(group, "format");
        const json* f = groupFormat ? groupFormat : format;
        if (!f || *f != "pack-quantized")
            throw Error(at + ": format " + shown(f) + " is not supported (supported: \"pack-quantized\" int4)");
        const json* weights = field(group, "weights");
        if (!weights) throw Error(at + ": a group without 'weights' (activations only) is not supported");
        checkWeights(*weights, at + ".weights");
        for (const char* key : {"input_activations", "output_activations"})
            if (const json* a = field(group, key))
                throw Error(at + ": quantized activations ('" + key + "' " + a->dump() +
                            ") are not supported; Tandem reads weight-only int4");
    }
    if (const json* kv = field(q, "kv_cache_scheme"))
        throw Error(where + ": a quantized KV cache ('kv_cache_scheme' " + kv->dump() + ") is not supported");
    if (const json* ignore = field(q, "ignore")) {
        if (!ignore->is_array()) throw Error(where + ": 'ignore' must be a list of module names");
        for (const auto& entry : *ignore) {
            if (!entry.is_string()) throw Error(where + ": 'ignore' must be a list of module names");
            scheme.ignore.push_back(entry.get<std::string>());
        }
    }
    return scheme;
}

std::string packedInt4Name(const std::string& weightName, const char* part) { return weightName + "_" + part; }

bool isPackedInt4(const TensorLookup& tensors, const std::string& weightName) {
    return !tensors.has(weightName) && tensors.has(packedInt4Name(weightName, "packed"));
}

namespace {

std::string shapeText(const std::vector<std::int64_t>& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

TensorView part(const TensorLookup& tensors, const std::string& weightName, const char* which) {
    const std::string name = packedInt4Name(weightName, which);
    if (!tensors.has(name))
        throw Error("compressed-tensors weight '" + weightName + "' in " + tensors.describe() + " has '" +
                    packedInt4Name(weightName, "packed") + "' but no '" + name +
                    "'; the checkpoint is incomplete: download it again");
    return tensors.view(name);
}

void expect(const TensorView& t, DType type, const std::vector<std::int64_t>& shape, const std::string& why) {
    if (t.dtype != type)
        throw Error(t.source + " has type " + std::string(dtypeName(t.dtype)) + "; compressed-tensors int4 stores it as " +
                    std::string(dtypeName(type)));
    if (t.shape != shape)
        throw Error(t.source + " has shape " + shapeText(t.shape) + ", expected " + shapeText(shape) + " " + why);
}

}  // namespace

PackedInt4View viewPackedInt4(const TensorLookup& tensors, const std::string& weightName, std::int64_t rows,
                              std::int64_t cols) {
    if (cols % kPackedInt4Group != 0)
        throw Error("compressed-tensors weight '" + weightName + "' in " + tensors.describe() + " has " +
                    std::to_string(cols) + " inputs, no multiple of " + std::to_string(kPackedInt4Group) +
                    "; Tandem reads int4 weights in whole groups only");
    const TensorView packed = part(tensors, weightName, "packed");
    const TensorView scale = part(tensors, weightName, "scale");
    const TensorView shape = part(tensors, weightName, "shape");
    const std::string why = "for a " + std::to_string(rows) + " x " + std::to_string(cols) +
                            " int4 matrix (from the model's configuration)";
    expect(packed, DType::I32, {rows, cols / 8}, why);
    expect(scale, DType::BF16, {rows, cols / kPackedInt4Group}, why + " in groups of " + std::to_string(kPackedInt4Group));
    if ((shape.dtype != DType::I32 && shape.dtype != DType::I64) || shape.shape != std::vector<std::int64_t>{2})
        throw Error(shape.source + " has type " + std::string(dtypeName(shape.dtype)) + " and shape " +
                    shapeText(shape.shape) + "; expected two integers, the weight's [out, in]");
    std::int64_t stored[2];
    for (int i = 0; i < 2; ++i) {
        if (shape.dtype == DType::I32) {
            std::int32_t v;
            std::memcpy(&v, shape.data + 4 * i, 4);
            stored[i] = v;
        } else {
            std::memcpy(&stored[i], shape.data + 8 * i, 8);
        }
    }
    if (stored[0] != rows || stored[1] != cols)
        throw Error(shape.source + " says [" + std::to_string(stored[0]) + ", " + std::to_string(stored[1]) +
                    "], expected [" + std::to_string(rows) + ", " + std::to_string(cols) +
                    "] from the model's configuration");
    return {packed.data, reinterpret_cast<const std::uint16_t*>(scale.data), rows, cols};
}

void dequantizePackedInt4Row(const std::byte* row, const std::uint16_t* scales, std::int64_t cols, float* out) {
    for (std::int64_t g = 0; g < cols / kPackedInt4Group; ++g) {
        std::uint16_t bits;
        std::memcpy(&bits, scales + g, sizeof bits);
        const float s = bf16ToFloat(bits);
        for (std::int64_t k = g * kPackedInt4Group; k < (g + 1) * kPackedInt4Group; ++k)
            out[k] = static_cast<float>(packedInt4Value(row, k)) * s;
    }
}

}  // namespace tandem::io
