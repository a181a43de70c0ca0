#include "convert/convert_plan.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "io/packed_store.h"
#include "io/store_checksum.h"
#include "model/family.h"
#include "model/gguf_config.h"
#include "convert/convert_gguf.h"
#include "text/gguf_tokenizer.h"
#include "io/text_file.h"
#include "tandem/error.h"

#ifndef TANDEM_VERSION
#error "TANDEM_VERSION must name the version the converter writes into manifests"
#endif

namespace tandem::convert {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSideFiles[] = {"config.json",           "generation_config.json", "tokenizer.json",
                                      "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                                      "chat_template.json",    "tiktoken.model"};

// The parts of "model.layers.L.<section>.experts.E.<rest>".
struct ExpertName {
    int layer = 0;
    std::string section;
    int expert = 0;
    std::string rest;
};

std::optional<int> number(std::string_view& s) {
    int value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end == s.data()) return std::nullopt;
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    return value;
}

bool consume(std::string_view& s, std::string_view prefix) {
    if (!s.starts_with(prefix)) return false;
    s.remove_prefix(prefix.size());
    return true;
}

std::optional<int> layerOf(std::string_view name) {
    if (!consume(name, "model.layers.")) return std::nullopt;
    const auto layer = number(name);
    if (!layer || !name.starts_with('.')) return std::nullopt;
    return layer;
}

std::optional<ExpertName> parseExpertName(std::string_view s) {
    ExpertName n;
    if (!consume(s, "model.layers.")) return std::nullopt;
    const auto layer = number(s);
    if (!layer || !consume(s, ".")) return std::nullopt;
    n.layer = *layer;
    for (const char* section : {"mlp", "block_sparse_moe"})
        if (consume(s, section)) {
            n.section = section;
            break;
        }
    if (n.section.empty() || !consume(s, ".experts.")) return std::nullopt;
    const auto expert = number(s);
    if (!expert || !consume(s, ".")) return std::nullopt;
    n.expert = *expert;
    n.rest = s;
    return n;
}

// gpt-oss's fused MXFP4 experts (model.layers.L.mlp.experts.{gate_up,down}_proj_{blocks,scales}).
bool isFusedMxfp4Expert(std::string_view name, const model::ModelConfig& c) {
    if (!c.mxfp4Experts || !layerOf(name)) return false;
    for (const char* suffix : {".mlp.experts.gate_up_proj_blocks", ".mlp.experts.gate_up_proj_scales",
                               ".mlp.experts.down_proj_blocks", ".mlp.experts.down_proj_scales"})
        if (name.ends_with(suffix)) return true;
    return false;
}

bool isBeyondLastLayer(std::string_view name, int layers) {
    const auto layer = layerOf(name);
    return layer && *layer >= layers;
}

// Refuses expert-looking tensors the packed layers would not hold, so nothing is dropped silently.
void checkRoutedExpert(const ExpertName& n, const std::string& name, const model::ModelConfig& c, const fs::path& dir) {
    const std::string input = fs::is_directory(dir) ? "checkpoint" : "file";
    const model::ExpertTensorNames& names = c.family->experts;
    const std::string section(names.section);
    std::vector<std::string> known;
    for (const std::string_view m : {names.gate, names.down, names.up}) {
        known.push_back(std::string(m) + ".weight");
        known.push_back(std::string(m) + ".weight_scale_inv");
        for (const char* part : {"packed", "scale", "shape"})  // compressed-tensors int4 (io/compressed_tensors.h)
            known.push_back(std::string(m) + ".weight_" + part);
    }
    if (n.section != section || !c.isMoeLayer(n.layer) || n.expert >= c.numExperts ||
        std::find(known.begin(), known.end(), n.rest) == known.end())
        throw Error(dir.string() + ": tensor '" + name + "' looks like a routed expert, but " + c.modelType +
                    " with this configuration has no such expert weight; the " + input +
                    " does not match its config, or its layout is not supported");
}

std::uint64_t fingerprintOf(const fs::path& dir, const io::Checkpoint& checkpoint) {
    io::Fingerprint f;
    f.add(io::readRegularFile(dir / "config.json"));
    for (const auto& name : checkpoint.tensorNames()) {
        const auto t = checkpoint.get(name);
        f.add(name);
        f.add(t.file->path().filename().string());
        f.add(io::dtypeName(t.info->dtype));
        for (const auto d : t.info->shape) f.add(static_cast<std::uint64_t>(d));
        f.add(t.info->begin);
        f.add(t.info->end);
    }
    return f.value();
}

}  // namespace

io::StoreManifest ConversionPlan::emptyManifest() const {
    io::StoreManifest m;
    m.converter = std::string("tandem ") + TANDEM_VERSION;
    m.sourcePath = source.string();
    m.sourceFingerprint = fingerprint;
    m.expertType = layout.type;
    m.hidden = layout.hidden;
    m.inter = layout.inter;
    m.experts = config.numExperts;
    m.expertBytes = layout.expertBytes;
    m.moeLayers = moeLayers;
    m.denseType = denseType;
    return m;
}

namespace {

// The input and everything read from it; the tensor listing is left to the caller.
void openFolder(ConversionPlan& p) {
    if (!fs::is_directory(p.source)) throw Error("model folder " + p.source.string() + " does not exist");
    if (io::PackedStore::isStore(p.source))
        throw Error(p.source.string() + " is a packed Tandem store already; convert reads the Hugging Face folder "
                                        "it was made from (" + io::readManifest(p.source).sourcePath + ")");
    p.config = model::loadModelConfig(p.source);
    p.checkpoint = std::make_unique<io::Checkpoint>(p.source);
    p.weights = model::loadWeights(*p.checkpoint, p.config);
    for (const char* file : kSideFiles)
        if (fs::is_regular_file(p.source / file)) p.sideFiles.push_back({file, std::nullopt});
    p.fingerprint = fingerprintOf(p.source, *p.checkpoint);
}

void openGguf(ConversionPlan& p) {
    p.gguf = std::make_unique<io::GgufModel>(p.source);
    p.source = p.gguf->path();  // the first part of a split model
    const std::string configJson = model::ggufConfigJson(*p.gguf);
    p.config = model::ggufModelConfig(*p.gguf);
    const auto tokenizer = text::ggufTokenizerFiles(*p.gguf);
    p.ggufTensors = std::make_unique<model::GgufTensors>(*p.gguf, p.config);
    p.weights = model::loadWeights(*p.ggufTensors, p.config);
    p.sideFiles = {{"config.json", configJson},
                   {"tokenizer.json", tokenizer.tokenizerJson},
                   {"tokenizer_config.json", tokenizer.tokenizerConfigJson}};
    p.fingerprint = ggufFingerprint(*p.gguf, configJson + tokenizer.tokenizerJson + tokenizer.tokenizerConfigJson);
}

}  // namespace

ConversionPlan planConversion(const fs::path& model, io::ExpertType type) {
    ConversionPlan p;
    p.source = fs::absolute(model).lexically_normal();
    if (io::GgufModel::isGgufPath(p.source)) openGguf(p);
    else openFolder(p);
    for (int l = 0; l < p.config.numLayers; ++l)
        if (p.config.isMoeLayer(l)) p.moeLayers.push_back(l);
    if (p.moeLayers.empty())
        throw Error(p.source.string() + " has no MoE layers: a packed store is for Mixture-of-Experts models; "
                                        "use the folder as it is");
    p.layout = io::ExpertLayout::make(type, p.config.hiddenSize, p.config.moeIntermediateSize);

    for (const auto& name : p.checkpoint ? p.checkpoint->tensorNames() : p.ggufTensors->names()) {
        if (isBeyondLastLayer(name, p.config.numLayers)) continue;
        if (const auto expert = parseExpertName(name)) {
            checkRoutedExpert(*expert, name, p.config, p.source);
            continue;
        }
        if (isFusedMxfp4Expert(name, p.config)) continue;  // packed into the layers; their biases stay dense
        if (p.ggufTensors) {
            p.denseTensors.push_back(ggufDenseTensor(*p.ggufTensors, name));
        } else {
            const auto t = p.checkpoint->get(name);
            p.denseTensors.push_back({name, t.info->dtype, t.info->shape, t.data, {}, 0});
        }
    }
    return p;
}

}  // namespace tandem::convert
