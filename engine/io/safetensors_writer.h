#pragma once
// Writing a .safetensors file from tensors that lie elsewhere (a mapped checkpoint), streamed in
// fixed pieces so the memory used does not grow with the file.
//
// The format requires the data section to be contiguous (the reference reader rejects gaps), so
// alignment comes from the order: the data section starts 64-byte aligned (the header is padded with
// spaces, as the format allows) and tensors follow largest alignment first, where a tensor's alignment
// is the largest power of two up to 64 dividing its byte size. Every tensor whose size is a multiple
// of 64 bytes -- every weight matrix of a real model -- therefore starts 64-byte aligned, and the rest
// start at least aligned to their element size.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace tandem::io {

struct TensorSource {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data;
    // A tensor made while it is written (dequantized from a GGUF, say): `produce(offset, out)` fills
    // out with the tensor's bytes [offset, offset + out.size()) of producedBytes; `data` stays empty.
    std::function<void(std::uint64_t offset, std::span<std::byte> out)> produce;
    std::uint64_t producedBytes = 0;

    std::uint64_t bytes() const { return produce ? producedBytes : data.size(); }
};

struct SafetensorsPlan {
    std::vector<TensorSource> tensors;  // in file order
    std::vector<std::uint64_t> begins;  // each tensor's offset in the data section
    std::string header;                 // the JSON header, padded
    std::uint64_t fileBytes = 0;
};

// Orders the tensors (stably: the given order within an alignment) and lays out the file.
SafetensorsPlan planSafetensors(std::vector<TensorSource> tensors, const std::map<std::string, std::string>& metadata);

// Writes the planned file at `path` in pieces of pieceBytes, calling progress(bytes written so far)
// after each, and returns the file's checksum over those pieces (io/store_checksum.h). Throws
// OutputError when a write fails.
std::uint64_t writeSafetensors(const SafetensorsPlan& plan, const std::filesystem::path& path, std::size_t pieceBytes,
                               const std::function<void(std::uint64_t)>& progress);

}  // namespace tandem::io
