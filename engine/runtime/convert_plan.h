#pragma once
// What converting one Hugging Face folder into a packed store involves, worked out before anything is
// written: the input opened and checked (config, every shard header, every tensor's shape), the MoE
// layers and the packed layout of their experts, the tensors that go to model.safetensors unchanged,
// and the small files copied beside them. A damaged or unsupported input fails here, with nothing
// written yet.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cpu/expert_format.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "io/store_manifest.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::runtime {

struct ConversionPlan {
    std::filesystem::path source;
    model::ModelConfig config;
    std::unique_ptr<io::Checkpoint> checkpoint;  // mapped shards the views below point into
    model::ModelWeights weights;                 // the routed experts are read through these views
    cpu::ExpertLayout layout;
    std::vector<int> moeLayers;
    // Every tensor but the routed experts ("model.layers.L.mlp.experts.E.*", or block_sparse_moe for
    // Mixtral; shared_experts stay) and the layers past num_hidden_layers (DeepSeek-V3's unused
    // multi-token-prediction layer), in name order.
    std::vector<io::TensorSource> denseTensors;
    std::vector<std::string> sideFiles;          // config.json, tokenizer files, ... present in the source
    std::uint64_t fingerprint = 0;               // of config.json and every tensor's header entry

    // The manifest of a store of this conversion that holds no files yet.
    io::StoreManifest emptyManifest() const;
    std::uint64_t layerBytes() const { return layout.expertBytes * static_cast<std::uint64_t>(config.numExperts); }
};

// Throws tandem::Error naming the file and the problem for a missing, damaged or unsupported input.
ConversionPlan planConversion(const std::filesystem::path& modelDir, cpu::ExpertType type);

}  // namespace tandem::runtime
