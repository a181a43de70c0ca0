#include "convert/convert_gguf.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "cpu/weight_matrix.h"
#include "io/store_checksum.h"

namespace tandem::convert {

namespace {

// Row r in Hugging Face's order is row permuted(r) of llama.cpp's: within each head of `head` rows,
// the converter moved the rotary pairs (i, i + head/2) next to each other, to rows (2i, 2i + 1).
std::int64_t sourceRow(std::int64_t r, int head) {
    if (head == 0) return r;
    const std::int64_t h = r / head, i = r % head, half = head / 2;
    return h * head + 2 * (i % half) + i / half;
}

}  // namespace

io::TensorSource ggufDenseTensor(const model::GgufTensors& tensors, const std::string& name) {
    const io::TensorView v = tensors.view(name);
    const int head = tensors.permutedHeadRows(name);
    const bool quantized = io::isBlockQuantized(v.dtype);
    io::TensorSource out{name, quantized ? io::DType::BF16 : v.dtype, v.shape, {}, {}, 0};
    const std::int64_t cols = v.shape.back();
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < v.shape.size(); ++i) rows *= v.shape[i];
    const std::uint64_t sourceRowBytes = io::dtypeRowBytes(v.dtype, cols);
    const std::uint64_t rowBytes = static_cast<std::uint64_t>(cols) * io::dtypeSize(out.dtype);
    if (!quantized && head == 0) {
        out.data = {v.data, sourceRowBytes * static_cast<std::uint64_t>(rows)};
        return out;
    }
    const cpu::WeightMatrix matrix{v.dtype, rows, cols, v.data};
    // One row of scratch for a row the writer's pieces cut through, and one of float32.
    auto scratch = std::make_shared<std::vector<std::byte>>(rowBytes);
    auto floats = std::make_shared<std::vector<float>>(static_cast<std::size_t>(cols));
    auto makeRow = [=](std::int64_t r, std::byte* dst) {
        const std::int64_t from = sourceRow(r, head);
        if (!quantized) {
            std::memcpy(dst, v.data + static_cast<std::uint64_t>(from) * sourceRowBytes, rowBytes);
            return;
        }
        matrix.dequantRow(from, floats->data());
        for (std::int64_t c = 0; c < cols; ++c) {
            const std::uint16_t b = io::floatToBf16((*floats)[static_cast<std::size_t>(c)]);
            std::memcpy(dst + 2 * c, &b, 2);
        }
    };
    out.producedBytes = rowBytes * static_cast<std::uint64_t>(rows);
    out.produce = [=](std::uint64_t offset, std::span<std::byte> bytes) {
        for (std::size_t done = 0; done < bytes.size();) {
            const std::uint64_t at = offset + done;
            const auto r = static_cast<std::int64_t>(at / rowBytes);
            const std::uint64_t within = at % rowBytes;
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(rowBytes - within, bytes.size() - done));
            if (within == 0 && n == rowBytes) {
                makeRow(r, bytes.data() + done);
            } else {
                makeRow(r, scratch->data());
                std::memcpy(bytes.data() + done, scratch->data() + within, n);
            }
            done += n;
        }
    };
    return out;
}

std::uint64_t ggufFingerprint(const io::GgufModel& gguf, const std::string& text) {
    io::Fingerprint f;
    f.add(text);
    for (const auto& [name, t] : gguf.tensors()) {
        f.add(name);
        f.add(t->file->filename().string());
        f.add(t->type->name);
        for (const auto d : t->dims) f.add(static_cast<std::uint64_t>(d));
        f.add(t->offset);
        f.add(t->bytes);
    }
    return f.value();
}

}  // namespace tandem::convert
