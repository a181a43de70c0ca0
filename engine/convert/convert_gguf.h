#pragma once
// The parts of converting a GGUF file that differ from a Hugging Face folder: its dense tensors are
// written into the store's model.safetensors in Hugging Face's layout, and its identity for resuming
// is a fingerprint of its headers.
#include <cstdint>
#include <string>

#include "io/gguf.h"
#include "io/safetensors_writer.h"
#include "model/gguf_tensors.h"

namespace tandem::convert {

// The dense tensor `name` as the store keeps it: F32, F16 and BF16 byte for byte, block-quantized
// types dequantized to bf16 (what the GPU computes in), `llama` query/key rows put back into Hugging
// Face's order. Made row by row while model.safetensors is written, so memory stays one row.
io::TensorSource ggufDenseTensor(const model::GgufTensors& tensors, const std::string& name);

// Of `text` (the generated config and tokenizer files) and every tensor's name, type, dims and place.
std::uint64_t ggufFingerprint(const io::GgufModel& gguf, const std::string& text);

}  // namespace tandem::convert
