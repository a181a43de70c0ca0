#pragma once
// Tensors looked up by their Hugging Face names, wherever they lie: a safetensors checkpoint folder
// (io/checkpoint.h) or a GGUF file seen through llama.cpp's naming (model/gguf_tensors.h). The model
// loader (model/weights.h) reads either through this.
#include <cstdint>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace tandem::io {

struct TensorView {
    std::string source;  // where it lies, for messages: "tensor 'x' in FILE"
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;  // row-major, Hugging Face order ([out, in] for a matrix)
    const std::byte* data = nullptr;
};

class TensorLookup {
public:
    virtual ~TensorLookup() = default;
    virtual bool has(const std::string& name) const = 0;
    // Throws an Error naming the source when there is no such tensor.
    virtual TensorView view(const std::string& name) const = 0;
    // The file or folder, for messages.
    virtual std::string describe() const = 0;
};

}  // namespace tandem::io
