#pragma once
// A model family: what one config.json model_type means, in one file per family (model/families/).
// The rest of the engine follows the family's description: the fields its config.json holds, which of
// its layers are mixtures of experts, and what its checkpoints call the routed experts' tensors. The
// layers it describes (ModelConfig::layers) are what both the CPU and the GPU forward pass run
// (model/forward.h). Adding a family is one file here, a line in families.cpp, and its kernels.
#include <string>
#include <string_view>
#include <vector>

namespace tandem::model {

struct ModelConfig;
class ConfigFields;

// The names of a MoE block's tensors in the family's Hugging Face checkpoints:
// model.layers.L.<section>.experts.E.<gate|up|down>.weight, <section>.gate.weight (the router).
struct ExpertTensorNames {
    std::string_view section;  // "mlp", "block_sparse_moe"
    std::string_view gate, up, down;
    std::string_view router = "gate";  // <section>.<router>.weight (gpt-oss: "router", with a bias)
};

struct Family {
    std::string_view name;                    // "qwen3_moe"
    std::vector<std::string_view> modelTypes;  // config.json model_type values it reads
    // The family's fields of config.json: attention, feed-forward, router. The fields every family
    // shares (sizes, rope, quantization, token ids) are read around it.
    void (*readConfig)(const ConfigFields& fields, ModelConfig& config);
    // Whether layer `layer` is a mixture of experts (with config.numExperts > 0).
    bool (*isMoeLayer)(const ModelConfig& config, int layer);
    ExpertTensorNames experts;
    // llama.cpp's GGUF stores this family's q and k rows permuted for its rotary layout.
    bool ggufPermutesQk = false;
};

// The family of a config.json model_type; nullptr when Tandem has none.
const Family* findFamily(std::string_view modelType);
// "qwen3_moe, deepseek_v3, kimi_k2, deepseek_v2, mixtral", for messages.
std::string supportedModelTypes();

}  // namespace tandem::model
