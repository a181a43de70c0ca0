#pragma once
// A GGUF model's tensors under the Hugging Face names the model loader and the converter use, so a
// GGUF file is read by the same code as a checkpoint folder. The mapping follows llama.cpp's names
// (token_embd, blk.N.attn_q, blk.N.ffn_gate_exps, ...):
// - stacked expert tensors [n_expert, rows, cols] are handed out one expert at a time, as views
//   (gpt-oss's MXFP4 ones too, as io::DType::MXFP4 blocks); gpt-oss's expert biases keep their stacks,
//   as mlp.experts.gate_proj_bias / up_proj_bias [E, I] and down_proj_bias [E, H] (model/weights.cpp);
// - `llama` query/key rows stay in llama.cpp's rope order (see model/gguf_config.h);
//   permutedHeadRows() tells a writer that wants Hugging Face's order how to undo it;
// - DeepSeek files from llama.cpp's MLA rework carry kv_b_proj split into attn_k_b (transposed) and
//   attn_v_b; those are joined back into kv_b_proj once, in memory (float32 from F32/F16 sources,
//   else bf16: 2 GB for all of DeepSeek-V3). Older files' attn_kv_b is used in place.
// Layers past num_hidden_layers (DeepSeek's multi-token-prediction layers) are left out; any other
// tensor the mapping does not know is an error, so nothing is dropped silently.
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tensor_lookup.h"
#include "model/config.h"

namespace tandem::model {

class GgufTensors : public io::TensorLookup {
public:
    // Throws tandem::Error naming the file and tensor for an unknown tensor, an unsupported type or
    // a shape the mapping cannot split.
    GgufTensors(const io::GgufModel& gguf, const ModelConfig& config);

    bool has(const std::string& name) const override { return entries_.count(name) != 0; }
    io::TensorView view(const std::string& name) const override;
    std::string describe() const override { return gguf_.path().string(); }

    std::vector<std::string> names() const;
    // For a `llama` query or key matrix, the rows per head (they are in llama.cpp's rope order); else 0.
    int permutedHeadRows(const std::string& name) const;
    // The GGUF tensors a name's data comes from, for fingerprints: name, type, dims, offset.
    const std::vector<const io::GgufTensor*>& sources(const std::string& name) const;

private:
    struct Entry {
        io::TensorView view;
        std::vector<const io::GgufTensor*> sources;
        int permutedHeadRows = 0;
    };

    void add(const io::GgufTensor& t);
    void addExperts(const io::GgufTensor& t, const std::string& prefix, const std::string& matrix);
    void joinKvB(int layer, const io::GgufTensor& kB, const io::GgufTensor& vB);

    const io::GgufModel& gguf_;
    ModelConfig config_;
    std::map<std::string, Entry> entries_;
    std::deque<std::vector<std::byte>> owned_;  // joined kv_b_proj matrices
};

}  // namespace tandem::model
