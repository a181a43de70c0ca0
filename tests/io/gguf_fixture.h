#pragma once
// Turns a fixture (a Hugging Face folder) into a GGUF the way llama.cpp's converter lays one out:
// its tensor names, stacked experts, `llama`'s permuted query/key rows, DeepSeek's split kv_b
// (newer files) or whole kv_b (older ones), its metadata keys and tokenizer.ggml.* keys. FP8 weights
// are dequantized first. Matrices get the chosen type where their rows fit its blocks (F32 otherwise,
// as llama.cpp falls back); norms and biases stay F32.
#include <QString>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf_writer.h"

namespace tandem::test {

struct GgufFixtureOptions {
    std::uint32_t matrixType = 0;  // a ggml type id (gguf_quantize.h)
    bool splitKvB = true;          // DeepSeek: attn_k_b + attn_v_b (llama.cpp since its MLA rework)
    bool floatRouter = false;      // the router (ffn_gate_inp) in F32, as llama.cpp's quantize leaves it
    // With a block type as matrixType: its dequantized values written as BF16 instead of its blocks, so a
    // file with exactly the weights the quantized one holds, through a path that has no blocks.
    bool dequantizedAsBf16 = false;
    // tokenizer.ggml.pre instead of the fixture's own (qwen2, or deepseek-v3 for deepseek2).
    std::string pre;
    // Tensors (llama.cpp's names) left out, to make incomplete files.
    std::vector<std::string> leaveOut;
};

// The fixtures of the families llama.cpp's GGUF files are written for here (qwen3moe, llama for Mixtral,
// deepseek2, glm4moe): every fixture.
QStringList ggufFixtureNames();

// `fixture` names a fixture or is the absolute path of a model folder made by a test.
GgufWriter ggufFromFixture(const QString& fixture, const GgufFixtureOptions& options);

}  // namespace tandem::test
