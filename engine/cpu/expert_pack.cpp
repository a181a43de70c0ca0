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

// MXFP4 ----------------------------------------------------------------------------------------------

// The bfloat16 bits of 2^(e - 128), the scale an E8M0 byte e becomes in a packed block (exact: bf16
// has float32's exponent range, e = 0 and 1 as subnormals).
std::uint16_t mxfp4ScaleBits(int e) {
    if (e >= 2) return static_cast<std::uint16_t>((e - 1) << 7);
    return e == 1 ? std::uint16_t{0x0040} : std::uint16_t{0x0020};
}

// 16 rows of one matrix in MXFP4: a nibble per value and an E8M0 exponent per 32-column group; -1 for a
// padding (or all-zero) group, whose packed scale is 0.
struct Fp4Rows {
    int cols = 0;
    std::vector<std::uint8_t> nibbles;  // [16][cols]
    std::vector<int> exponents;         // [16][cols / 32]

    void reset(int paddedCols) {
        cols = paddedCols;
        nibbles.assign(static_cast<std::size_t>(kPanelRows) * cols, 0);
        exponents.assign(static_cast<std::size_t>(kPanelRows) * (cols / kMxfp4Group), -1);
    }
    std::uint8_t& nibble(int o, int k) { return nibbles[static_cast<std::size_t>(o) * cols + k]; }
    std::uint8_t nibble(int o, int k) const { return nibbles[static_cast<std::size_t>(o) * cols + k]; }
    int& exponent(int o, int g) { return exponents[static_cast<std::size_t>(o) * (cols / kMxfp4Group) + g]; }
    int exponent(int o, int g) const { return exponents[static_cast<std::size_t>(o) * (cols / kMxfp4Group) + g]; }
};

// The e2m1 magnitude index (0..7: 0, .5, 1, 1.5, 2, 3, 4, 6) nearest t >= 0, ties to the even index
// (round-to-nearest-even of the e2m1 mantissa); past 6 saturates. Counts the midpoints below t: a tie
// at a midpoint whose lower neighbour is odd (0.75, 1.75, 3.5) goes up, the others down.
int nearestFp4(double t) {
    return (t > 0.25) + (t >= 0.75) + (t > 1.25) + (t >= 1.75) + (t > 2.5) + (t >= 3.5) + (t > 5.0);
}

// Rounds float rows to MXFP4: per group the smallest power of two 2^(e - 127) with absMax / it <= 6,
// so nothing saturates, then every value to the nearest e2m1.
void quantizeFp4(const PanelRows& w, Fp4Rows& out) {
    out.reset(w.cols);
    for (int o = 0; o < kPanelRows; ++o)
        for (int g = 0; g < w.cols / kMxfp4Group; ++g) {
            const float absMax = rowAbsMax(&w.v[static_cast<std::size_t>(o) * w.cols + g * kMxfp4Group], kMxfp4Group);
            if (absMax == 0.0f) continue;  // scale 0, nibbles 0
            int ex = 0;
            const double m = std::frexp(static_cast<double>(absMax) / 6.0, &ex);  // absMax / 6 = m 2^ex, m in [0.5, 1)
            const int e = std::clamp((m == 0.5 ? ex - 1 : ex) + 127, 0, 254);
            out.exponent(o, g) = e;
            const double inverse = std::ldexp(1.0, 127 - e);  // a power of two: t below is exact
            for (int i = 0; i < kMxfp4Group; ++i) {
                const int k = g * kMxfp4Group + i;
                const double t = static_cast<double>(std::fabs(w.at(o, k))) * inverse;
                const int idx = nearestFp4(t);
                out.nibble(o, k) = static_cast<std::uint8_t>(idx == 0 ? 0 : (w.at(o, k) < 0 ? 8 | idx : idx));
            }
        }
}

// Rows [firstRow, firstRow + 16) of a checkpoint matrix, zero past its rows and columns.
void readFp4Rows(const Mxfp4Matrix& m, int firstRow, int paddedCols, Fp4Rows& out, const char* what) {
    out.reset(paddedCols);
    const int groups = m.cols / kMxfp4Group;
    for (int o = 0; o < kPanelRows && firstRow + o < m.rows; ++o) {
        const std::size_t r = static_cast<std::size_t>(firstRow + o);
        const std::uint8_t* blocks = m.blocks + r * m.blockRowStride;
        const std::uint8_t* scales = m.scales + r * m.scaleRowStride;
        for (int g = 0; g < groups; ++g) {
            if (scales[g] == 255)
                throw Error(std::string("expert ") + what + " row " + std::to_string(firstRow + o) + " group " + std::to_string(g) +
                            " has the MXFP4 scale 0xff (NaN); the checkpoint is damaged");
            out.exponent(o, g) = scales[g];
            for (int b = 0; b < 16; ++b) {
                const std::uint8_t byte = blocks[16 * g + b];
                out.nibble(o, kMxfp4Group * g + 2 * b) = byte & 0xf;
                out.nibble(o, kMxfp4Group * g + 2 * b + 1) = byte >> 4;
            }
        }
    }
}

// One block from MXFP4 rows: INT4's nibble order, bf16 scales 2^(e - 128) where INT4 has fp16 ones.
void writeFp4Block(const Fp4Rows& w, int k0, std::byte* dst) {
    auto* nibbles = reinterpret_cast<std::uint8_t*>(dst);
    auto* scales = reinterpret_cast<std::uint16_t*>(dst + 512);
    for (int g = 0; g < 2; ++g) {
        for (int o = 0; o < 16; ++o) {
            const int e = w.exponent(o, k0 / kMxfp4Group + g);
            scales[g * 16 + o] = e < 0 ? std::uint16_t{0} : mxfp4ScaleBits(e);
        }
        for (int v = 0; v < 4; ++v)
            for (int o = 0; o < 16; ++o)
                for (int j = 0; j < 4; ++j) {
                    const int k = k0 + 32 * g + 4 * v + j;
                    nibbles[(4 * g + v) * 64 + o * 4 + j] = static_cast<std::uint8_t>(w.nibble(o, k) | (w.nibble(o, k + 16) << 4));
                }
    }
}

// A block of any type: MXFP4 from `fp4` (the rows already in MXFP4), the others from w.
void writeBlock(const ExpertLayout& l, const PanelRows& w, const Fp4Rows& fp4, const float* rowScale, int k0, std::byte* dst) {
    switch (l.type) {
    case ExpertType::BF16: writeBf16Block(w, k0, dst); return;
    case ExpertType::INT8: writeInt8Block(w, rowScale, k0, dst); return;
    case ExpertType::INT4: writeInt4Block(w, k0, dst); return;
    case ExpertType::MXFP4: writeFp4Block(fp4, k0, dst); return;
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
    case ExpertType::MXFP4: {
        const int g = kk / 32, inGroup = kk % 32, high = inGroup / 16, v = (inGroup % 16) / 4, j = inGroup % 4;
        const auto byte = static_cast<std::uint8_t>(src[(4 * g + v) * 64 + o * 4 + j]);
        const int n = high ? byte >> 4 : byte & 0xf;
        std::uint16_t h;
        std::memcpy(&h, src + 512 + (g * 16 + o) * 2, 2);
        return static_cast<float>(kFp4Doubled[n]) * bf16Value(h);  // exact: 2v times 2^(e - 128)
    }
    }
    return 0.0f;
}

}  // namespace

void packExpert(const ExpertLayout& l, const ExpertRows& rows, std::byte* dst) {
    std::memset(dst, 0, l.expertBytes);
    PanelRows gate, up;
    Fp4Rows gateFp4, upFp4;
    for (int p = 0; p < l.gateUpPanels; ++p) {
        gate.read(rows.gate, p * kPanelRows, l.inter, l.hidden, l.hiddenPad, "gate");
        up.read(rows.up, p * kPanelRows, l.inter, l.hidden, l.hiddenPad, "up");
        if (l.type == ExpertType::MXFP4) {
            quantizeFp4(gate, gateFp4);
            quantizeFp4(up, upFp4);
        }
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
            writeBlock(l, gate, gateFp4, gateScale, kb * l.kBlock, panel + (2 * kb) * l.blockBytes);
            writeBlock(l, up, upFp4, upScale, kb * l.kBlock, panel + (2 * kb + 1) * l.blockBytes);
        }
    }
    packDownPanels(l, rows.down, dst + l.downOffset, 0, l.downPanels);
}

void packDownPanels(const ExpertLayout& l, const RowReader& reader, std::byte* down, int q0, int q1) {
    PanelRows rows;
    Fp4Rows fp4;
    for (int q = q0; q < q1; ++q) {
        rows.read(reader, q * kPanelRows, l.hidden, l.inter, l.interPad, "down");
        if (l.type == ExpertType::MXFP4) quantizeFp4(rows, fp4);
        float scale[16] = {};
        if (l.type == ExpertType::INT8) {
            rowScales(rows, l.inter, scale);
            auto* scales = reinterpret_cast<float*>(down + (l.downScalesOffset - l.downOffset));
            for (int o = 0; o < 16 && q * 16 + o < l.hidden; ++o) scales[q * 16 + o] = scale[o];
        }
        for (int c = 0; c < l.chunks; ++c) {
            std::byte* panel = down + (l.chunkOffset(c) - l.downOffset) + static_cast<std::size_t>(q) * l.chunkPanelBytes(c);
            for (int kb = 0; kb < l.chunkKBlocks(c); ++kb)
                writeBlock(l, rows, fp4, scale, c * kChunkCols + kb * l.kBlock, panel + kb * l.blockBytes);
        }
    }
}

void packExpertMxfp4(const ExpertLayout& l, const Mxfp4Matrix& gate, const Mxfp4Matrix& up, const Mxfp4Matrix& down,
                     std::byte* dst) {
    if (l.type != ExpertType::MXFP4)
        throw Error("packing MXFP4 blocks needs an mxfp4 expert layout, not " + std::string(expertTypeName(l.type)));
    auto check = [](const Mxfp4Matrix& m, int rows, int cols, const char* what) {
        if (m.rows != rows || m.cols != cols)
            throw Error(std::string("expert ") + what + " is " + std::to_string(m.rows) + "x" + std::to_string(m.cols) + ", expected " +
                        std::to_string(rows) + "x" + std::to_string(cols));
        if (cols % kMxfp4Group != 0)
            throw Error(std::string("expert ") + what + " has " + std::to_string(cols) + " columns, not a whole number of MXFP4 groups of 32");
        if (!m.blocks || !m.scales || m.blockRowStride < static_cast<std::size_t>(cols / 2) ||
            m.scaleRowStride < static_cast<std::size_t>(cols / kMxfp4Group))
            throw Error(std::string("expert ") + what + ": MXFP4 blocks and scales need their data and row strides of at least a row");
    };
    check(gate, l.inter, l.hidden, "gate_proj");
    check(up, l.inter, l.hidden, "up_proj");
    check(down, l.hidden, l.inter, "down_proj");
    std::memset(dst, 0, l.expertBytes);
    Fp4Rows g, u;
    for (int p = 0; p < l.gateUpPanels; ++p) {
        readFp4Rows(gate, p * kPanelRows, l.hiddenPad, g, "gate_proj");
        readFp4Rows(up, p * kPanelRows, l.hiddenPad, u, "up_proj");
        std::byte* panel = dst + static_cast<std::size_t>(p) * l.gateUpPanelBytes;
        for (int kb = 0; kb < l.hiddenKBlocks(); ++kb) {
            writeFp4Block(g, kb * l.kBlock, panel + (2 * kb) * l.blockBytes);
            writeFp4Block(u, kb * l.kBlock, panel + (2 * kb + 1) * l.blockBytes);
        }
    }
    std::byte* downBytes = dst + l.downOffset;
    for (int q = 0; q < l.downPanels; ++q) {
        readFp4Rows(down, q * kPanelRows, l.interPad, g, "down_proj");
        for (int c = 0; c < l.chunks; ++c) {
            std::byte* panel = downBytes + (l.chunkOffset(c) - l.downOffset) + static_cast<std::size_t>(q) * l.chunkPanelBytes(c);
            for (int kb = 0; kb < l.chunkKBlocks(c); ++kb) writeFp4Block(g, c * kChunkCols + kb * l.kBlock, panel + kb * l.blockBytes);
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
