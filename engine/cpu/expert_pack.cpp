#include "cpu/expert_pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/half_float.h"
#include "io/dtype.h"
#include "tandem/error.h"

namespace tandem::cpu {

namespace {

// 16 rows of one matrix, zero-padded to `cols` columns; rows past `validRows` are zero.
struct PanelRows {
    int cols = 0;
    std::vector<float> v;
    float* row(int o) { return v.data() + static_cast<std::size_t>(o) * cols; }
    float at(int o, int k) const { return v[static_cast<std::size_t>(o) * cols + k]; }

    void read(const RowReader& reader, int firstRow, int validRows, int realCols, int paddedCols, const char* what) {
        cols = paddedCols;
        v.assign(static_cast<std::size_t>(kPanelRows) * cols, 0.0f);
        for (int o = 0; o < kPanelRows && firstRow + o < validRows; ++o) {
            reader(firstRow + o, row(o));
            for (int k = 0; k < realCols; ++k)
                if (!std::isfinite(row(o)[k]))
                    throw Error(std::string("expert ") + what + " weight row " + std::to_string(firstRow + o) +
                                " holds NaN or infinity; the checkpoint is damaged");
            std::fill(row(o) + realCols, row(o) + cols, 0.0f);
        }
    }
};

float rowAbsMax(const float* r, int n) {
    float m = 0.0f;
    for (int k = 0; k < n; ++k) m = std::max(m, std::fabs(r[k]));
    return m;
}

int quantize(float w, float scale, int lo, int hi) {
    if (scale == 0.0f) return 0;
    return std::clamp(static_cast<int>(std::nearbyint(w / scale)), lo, hi);
}

float int8RowScale(const float* r, int n) { return rowAbsMax(r, n) / 127.0f; }

// One block of 16 outputs x kBlock inputs starting at input k0.
void writeBf16Block(const PanelRows& w, int k0, std::byte* dst) {
    auto* out = reinterpret_cast<std::uint16_t*>(dst);
    for (int j = 0; j < 16; ++j)
        for (int o = 0; o < 16; ++o) {
            out[j * 32 + o * 2] = floatToBf16(w.at(o, k0 + 2 * j));
            out[j * 32 + o * 2 + 1] = floatToBf16(w.at(o, k0 + 2 * j + 1));
        }
}

void writeInt8Block(const PanelRows& w, const float* rowScale, int k0, std::byte* dst) {
    auto* out = reinterpret_cast<std::uint8_t*>(dst);
    for (int j = 0; j < 16; ++j)
        for (int o = 0; o < 16; ++o)
            for (int i = 0; i < 4; ++i)
                out[j * 64 + o * 4 + i] = static_cast<std::uint8_t>(quantize(w.at(o, k0 + 4 * j + i), rowScale[o], -127, 127) + 128);
}

void writeInt4Block(const PanelRows& w, int k0, std::byte* dst) {
    auto* nibbles = reinterpret_cast<std::uint8_t*>(dst);
    auto* scales = reinterpret_cast<std::uint16_t*>(dst + 512);
    for (int g = 0; g < 2; ++g) {
        float scale[16];
        for (int o = 0; o < 16; ++o) {
            const float absMax = rowAbsMax(&w.v[static_cast<std::size_t>(o) * w.cols + k0 + 32 * g], kInt4Group);
            // The kernels multiply by the fp16 scale, so quantize against exactly that value.
            const std::uint16_t h = floatToF16(std::min(absMax / 7.0f, 65504.0f));
            scales[g * 16 + o] = h;
            scale[o] = io::f16ToFloat(h);
        }
        for (int v = 0; v < 4; ++v)
            for (int o = 0; o < 16; ++o)
                for (int j = 0; j < 4; ++j) {
                    const int k = k0 + 32 * g + 4 * v + j;
                    const int lo = quantize(w.at(o, k), scale[o], -8, 7) + 8;
                    const int hi = quantize(w.at(o, k + 16), scale[o], -8, 7) + 8;
                    nibbles[(4 * g + v) * 64 + o * 4 + j] = static_cast<std::uint8_t>(lo | (hi << 4));
                }
    }
}

void writeBlock(const ExpertLayout& l, const PanelRows& w, const float* rowScale, int k0, std::byte* dst) {
    switch (l.type) {
    case ExpertType::BF16: writeBf16Block(w, k0, dst); return;
    case ExpertType::INT8: writeInt8Block(w, rowScale, k0, dst); return;
    case ExpertType::INT4: writeInt4Block(w, k0, dst); return;
    }
}

void rowScales(const PanelRows& w, int realCols, float* out) {
    for (int o = 0; o < kPanelRows; ++o) out[o] = int8RowScale(&w.v[static_cast<std::size_t>(o) * w.cols], realCols);
}

// Inverse of the block writers: weight (o, k0 + kk) of the block at src, dequantized.
float readBlockWeight(const ExpertLayout& l, const std::byte* src, float rowScale, int o, int kk) {
    switch (l.type) {
    case ExpertType::BF16: {
        std::uint16_t b;
        std::memcpy(&b, src + (kk / 2) * 64 + o * 4 + (kk % 2) * 2, 2);
        return bf16Value(b);
    }
    case ExpertType::INT8: {
        const auto u = static_cast<std::uint8_t>(src[(kk / 4) * 64 + o * 4 + kk % 4]);
        return static_cast<float>(static_cast<int>(u) - 128) * rowScale;
    }
    case ExpertType::INT4: {
        const int g = kk / 32, inGroup = kk % 32, high = inGroup / 16, v = (inGroup % 16) / 4, j = inGroup % 4;
        const auto byte = static_cast<std::uint8_t>(src[(4 * g + v) * 64 + o * 4 + j]);
        const int n = high ? byte >> 4 : byte & 0xf;
        std::uint16_t h;
        std::memcpy(&h, src + 512 + (g * 16 + o) * 2, 2);
        return static_cast<float>(n - 8) * io::f16ToFloat(h);
    }
    }
    return 0.0f;
}

}  // namespace

void packExpert(const ExpertLayout& l, const ExpertRows& rows, std::byte* dst) {
    std::memset(dst, 0, l.expertBytes);
    PanelRows gate, up;
    for (int p = 0; p < l.gateUpPanels; ++p) {
        gate.read(rows.gate, p * kPanelRows, l.inter, l.hidden, l.hiddenPad, "gate");
        up.read(rows.up, p * kPanelRows, l.inter, l.hidden, l.hiddenPad, "up");
        std::byte* panel = dst + static_cast<std::size_t>(p) * l.gateUpPanelBytes;
        float gateScale[16] = {}, upScale[16] = {};
        if (l.type == ExpertType::INT8) {
            rowScales(gate, l.hidden, gateScale);
            rowScales(up, l.hidden, upScale);
            auto* scales = reinterpret_cast<float*>(panel + static_cast<std::size_t>(l.hiddenKBlocks()) * 2 * l.blockBytes);
            std::copy_n(gateScale, 16, scales);
            std::copy_n(upScale, 16, scales + 16);
        }
        for (int kb = 0; kb < l.hiddenKBlocks(); ++kb) {
            writeBlock(l, gate, gateScale, kb * l.kBlock, panel + (2 * kb) * l.blockBytes);
            writeBlock(l, up, upScale, kb * l.kBlock, panel + (2 * kb + 1) * l.blockBytes);
        }
    }
    packDownPanels(l, rows.down, dst + l.downOffset, 0, l.downPanels);
}

void packDownPanels(const ExpertLayout& l, const RowReader& reader, std::byte* down, int q0, int q1) {
    PanelRows rows;
    for (int q = q0; q < q1; ++q) {
        rows.read(reader, q * kPanelRows, l.hidden, l.inter, l.interPad, "down");
        float scale[16] = {};
        if (l.type == ExpertType::INT8) {
            rowScales(rows, l.inter, scale);
            auto* scales = reinterpret_cast<float*>(down + (l.downScalesOffset - l.downOffset));
            for (int o = 0; o < 16 && q * 16 + o < l.hidden; ++o) scales[q * 16 + o] = scale[o];
        }
        for (int c = 0; c < l.chunks; ++c) {
            std::byte* panel = down + (l.chunkOffset(c) - l.downOffset) + static_cast<std::size_t>(q) * l.chunkPanelBytes(c);
            for (int kb = 0; kb < l.chunkKBlocks(c); ++kb)
                writeBlock(l, rows, scale, c * kChunkCols + kb * l.kBlock, panel + kb * l.blockBytes);
        }
    }
}

void packExpert(const ExpertLayout& l, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                std::byte* dst) {
    auto check = [](const WeightMatrix& w, int rows, int cols, const char* what) {
        if (w.rows != rows || w.cols != cols)
            throw Error(std::string("expert ") + what + " is " + std::to_string(w.rows) + "x" + std::to_string(w.cols) +
                        ", expected " + std::to_string(rows) + "x" + std::to_string(cols));
    };
    check(gate, l.inter, l.hidden, "gate_proj");
    check(up, l.inter, l.hidden, "up_proj");
    check(down, l.hidden, l.inter, "down_proj");
    packExpert(l,
               {[&](std::int64_t r, float* out) { gate.dequantRow(r, out); },
                [&](std::int64_t r, float* out) { up.dequantRow(r, out); },
                [&](std::int64_t r, float* out) { down.dequantRow(r, out); }},
               dst);
}

void unpackExpertRow(const ExpertLayout& l, const std::byte* expert, ExpertMatrix m, int row, float* out) {
    const int p = row / kPanelRows, o = row % kPanelRows;
    if (m == ExpertMatrix::Down) {
        unpackDownRow(l, expert + l.downOffset, row, out);
        return;
    }
    const std::byte* panel = expert + static_cast<std::size_t>(p) * l.gateUpPanelBytes;
    const int which = m == ExpertMatrix::Gate ? 0 : 1;
    float scale = 0.0f;
    if (l.type == ExpertType::INT8)
        std::memcpy(&scale,
                    panel + static_cast<std::size_t>(l.hiddenKBlocks()) * 2 * l.blockBytes + (which * 16 + o) * sizeof(float),
                    sizeof scale);
    for (int k = 0; k < l.hidden; ++k) {
        const std::byte* block = panel + static_cast<std::size_t>(2 * (k / l.kBlock) + which) * l.blockBytes;
        out[k] = readBlockWeight(l, block, scale, o, k % l.kBlock);
    }
}

void unpackDownRow(const ExpertLayout& l, const std::byte* down, int row, float* out) {
    const int p = row / kPanelRows, o = row % kPanelRows;
    float scale = 0.0f;
    if (l.type == ExpertType::INT8)
        std::memcpy(&scale, down + (l.downScalesOffset - l.downOffset) + row * sizeof(float), sizeof scale);
    for (int k = 0; k < l.inter; ++k) {
        const int c = k / kChunkCols, kk = k % kChunkCols;
        const std::byte* block = down + (l.chunkOffset(c) - l.downOffset) + static_cast<std::size_t>(p) * l.chunkPanelBytes(c) +
                                 static_cast<std::size_t>(kk / l.kBlock) * l.blockBytes;
        out[k] = readBlockWeight(l, block, scale, o, kk % l.kBlock);
    }
}

}  // namespace tandem::cpu
