#pragma once
// A GGUF model's tokenizer (its tokenizer.ggml.* metadata) written as the tokenizer.json and
// tokenizer_config.json of the Hugging Face original, which text::Tokenizer and text::ChatTemplate
// read. Supported:
// - byte-level BPE ("gpt2": tokens, merges, token types, BOS/EOS, add_bos_token) with the
//   pre-tokenizers llama.cpp names in tokenizer.ggml.pre for the models Tandem runs -- qwen2 (Qwen2 and
//   Qwen3), deepseek-v3 (DeepSeek-V3/R1), deepseek-llm (DeepSeek-V2), llama-bpe (Llama 3). Each name
//   becomes the pre-tokenizer of the original tokenizer.json; an unknown name is an error rather than a
//   guess, since a different split gives different ids.
// - SentencePiece BPE with byte fallback ("llama": Mistral, Mixtral): tokens, scores and token types
//   become Hugging Face's converted layout (a BPE model whose merges come from the scores, "▁" for
//   spaces, byte pieces for unknown characters), BOS added unless add_bos_token says otherwise.
#include <string>

#include "io/gguf.h"

namespace tandem::text {

struct GgufTokenizerFiles {
    std::string tokenizerJson;
    std::string tokenizerConfigJson;
};

// Throws tandem::Error naming the file and key for missing, mistyped or unsupported metadata.
GgufTokenizerFiles ggufTokenizerFiles(const io::GgufModel& gguf);

}  // namespace tandem::text
