#pragma once
// What converting one Hugging Face folder or GGUF file into a packed store involves, worked out before
// anything is written: the input opened and checked (config, every shard header, every tensor's shape), the MoE
// layers and the packed layout of their experts, the tensors that go to model.safetensors unchanged,
// and the small files copied beside them. A damaged or unsupported input fails here, with nothing
// written yet.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/expert_layout.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/safetensors_writer.h"
#include "io/store_manifest.h"
#include "model/config.h"
#include "model/gguf_tensors.h"
#include "model/weights.h"

namespace tandem::convert {

// A file of the store beside the tensors: copied from the source folder, or written from `text` (the
// config.json and tokenizer files made from a GGUF's metadata).
struct SideFile {
    std::string name;
    std::optional<std::string> text;
};

struct ConversionPlan {
    std::filesystem::path source;
    model::ModelConfig config;
    // The mapped input the views below point into: a Hugging Face folder, or a GGUF file seen through
    // Hugging Face names.
    std::unique_ptr<io::Checkpoint> checkpoint;
    std::unique_ptr<io::GgufModel> gguf;
    std::unique_ptr<model::GgufTensors> ggufTensors;
    model::ModelWeights weights;                 // the routed experts are read through these views
    io::ExpertLayout layout;
    std::vector<int> moeLayers;
    // Every tensor but the routed experts ("model.layers.L.mlp.experts.E.*", or block_sparse_moe for
    // Mixtral; shared_experts stay) and the layers past num_hidden_layers (DeepSeek-V3's unused
    // multi-token-prediction layer), in name order. From a GGUF they are made while written
    // (convert/convert_gguf.h).
    std::vector<io::TensorSource> denseTensors;
    std::vector<SideFile> sideFiles;             // config.json, tokenizer files, ...
    std::uint64_t fingerprint = 0;               // of config.json and every tensor's header entry
    std::string denseType = "checkpoint";        // how denseTensors hold the dense products (convert_dense.h)

    // The manifest of a store of this conversion that holds no files yet.
    io::StoreManifest emptyManifest() const;
    std::uint64_t layerBytes() const { return layout.expertBytes * static_cast<std::uint64_t>(config.numExperts); }
};

// Throws tandem::Error naming the file and the problem for a missing, damaged or unsupported input.
// `model` is a Hugging Face folder or a .gguf file (any part of a split one).
ConversionPlan planConversion(const std::filesystem::path& model, io::ExpertType type);

}  // namespace tandem::convert
