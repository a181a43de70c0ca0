#pragma once
// The configuration of a GGUF model, read from llama.cpp's metadata keys ({arch}.block_count,
// {arch}.expert_count, ...) for the architectures Tandem runs: qwen3moe, deepseek2 (DeepSeek-V2, V3,
// R1, Kimi-K2), glm4moe (GLM-4.5), gpt-oss and llama with experts (Mixtral). It is written as the config.json a Hugging Face
// folder of the same model has, and parsed by the same code (model/config.h), so a converted store
// holds an ordinary config.json.
#include <string>

#include "io/gguf.h"
#include "model/config.h"

namespace tandem::model {

// config.json text. Throws tandem::Error naming the file and the key for a missing or mistyped key or
// an unsupported architecture.
std::string ggufConfigJson(const io::GgufModel& gguf);

// The ModelConfig of the GGUF's tensors as they lie in the file: the same as config.json's, except
// that for `llama` the query and key rows are in llama.cpp's rope order (its converter permutes each
// head's rows so that rotary pairs are adjacent), which the config describes as interleaved rope --
// the same attention, with no copy of the weights.
ModelConfig ggufModelConfig(const io::GgufModel& gguf);

}  // namespace tandem::model
