#include "cpu/int4_repack.h"

#include <cmath>
#include <cstring>
#include <string>

#include "cpu/expert_pack.h"
#include "cpu/half_float.h"
#include "io/compressed_tensors.h"
#include "tandem/error.h"

namespace tandem::cpu {

namespace {

static_assert(io::kPackedInt4Group == kInt4Group, "compressed-tensors' groups must be INT4's");

// Scale group g of row r (of the whole tensor) of an int4 matrix.
std::uint16_t groupScale(const WeightMatrix& m, std::int64_t r, std::int64_t g) {
    std::uint16_t bits;
    std::memcpy(&bits, m.int4Scales + r * (m.cols / kInt4Group) + g, sizeof bits);
    return bits;
}

// The INT4 block of rows [firstRow, firstRow + 16) and inputs [k0, k0 + 64) of `m` (rows of this view). Rows
// and inputs past the matrix (the layout's padding) get nibble 8 and scale 0, as packExpert gives zeros.
void repackBlock(const WeightMatrix& m, std::int64_t firstRow, std::int64_t k0, std::byte* dst) {
    auto* out = reinterpret_cast<std::uint8_t*>(dst);
    const std::size_t rowBytes = static_cast<std::size_t>(m.cols / 2);
    for (int g = 0; g < 2; ++g) {
        const std::int64_t c0 = k0 + kInt4Group * g;
        for (int o = 0; o < kPanelRows; ++o) {
            const std::int64_t r = firstRow + o;
            std::uint8_t n[kInt4Group];
            std::uint16_t scale = 0;
            if (r < m.rows && c0 < m.cols) {
                const std::int64_t tensorRow = m.firstRow + r;
                const auto* src = reinterpret_cast<const std::uint8_t*>(m.data) + static_cast<std::size_t>(tensorRow) * rowBytes +
                                  c0 / 2;
                for (int i = 0; i < kInt4Group / 2; ++i) {
                    n[2 * i] = src[i] & 0xf;
                    n[2 * i + 1] = src[i] >> 4;
                }
                scale = int4ScaleAsF16(groupScale(m, tensorRow, c0 / kInt4Group));
            } else {
                std::memset(n, 8, sizeof n);
            }
            std::memcpy(dst + 512 + (g * kPanelRows + o) * 2, &scale, sizeof scale);
            // Byte 4*o + j of vector v holds input 4v + j of the group (low nibble) and input 4v + j + 16 (high).
            for (int v = 0; v < 4; ++v)
                for (int j = 0; j < 4; ++j)
                    out[(4 * g + v) * 64 + o * 4 + j] = static_cast<std::uint8_t>(n[4 * v + j] | (n[4 * v + j + 16] << 4));
        }
    }
}

void repackExpert(const ExpertLayout& l, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                  std::byte* dst) {
    std::memset(dst, 0, l.expertBytes);
    for (int p = 0; p < l.gateUpPanels; ++p) {
        std::byte* panel = dst + static_cast<std::size_t>(p) * l.gateUpPanelBytes;
        for (int kb = 0; kb < l.hiddenKBlocks(); ++kb) {
            repackBlock(gate, p * kPanelRows, kb * l.kBlock, panel + (2 * kb) * l.blockBytes);
            repackBlock(up, p * kPanelRows, kb * l.kBlock, panel + (2 * kb + 1) * l.blockBytes);
        }
    }
    for (int q = 0; q < l.downPanels; ++q)
        for (int c = 0; c < l.chunks; ++c) {
            std::byte* panel = dst + l.chunkOffset(c) + static_cast<std::size_t>(q) * l.chunkPanelBytes(c);
            for (int kb = 0; kb < l.chunkKBlocks(c); ++kb)
                repackBlock(down, q * kPanelRows, c * kChunkCols + kb * l.kBlock, panel + kb * l.blockBytes);
        }
}

}  // namespace

std::uint16_t int4ScaleAsF16(std::uint16_t bf16Scale) {
    const float s = io::bf16ToFloat(bf16Scale);
    if (!std::isfinite(s))
        throw Error("an int4 group scale is NaN or infinite; the checkpoint is damaged: download it again");
    const std::uint16_t h = floatToF16(s);
    if ((h & 0x7fffu) == 0x7c00u)
        throw Error("an int4 group scale (" + std::to_string(s) +
                    ") is beyond the range of the fp16 scales of int4 experts (65504); load or convert the model with "
                    "bf16 or int8 experts, which dequantize it");
    return h;
}

bool repacksInt4Exactly(const ExpertLayout& l, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down) {
    return l.type == ExpertType::INT4 && gate.dtype == io::DType::I4 && up.dtype == io::DType::I4 &&
           down.dtype == io::DType::I4;
}

void packCheckpointExpert(const ExpertLayout& l, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                          std::byte* dst) {
    // gpt-oss's MXFP4 experts (E2M1 views with their E8M0 scales) into an MXFP4 layout: bit for bit.
    if (l.type == ExpertType::MXFP4 && gate.dtype == io::DType::E2M1 && up.dtype == io::DType::E2M1 &&
        down.dtype == io::DType::E2M1) {
        const auto mx = [](const WeightMatrix& w) {
            const auto row = static_cast<std::size_t>(w.rowStride * w.cols);  // nibbles of one step of rows, x2
            const auto first = static_cast<std::size_t>(w.firstRow) * row;
            return Mxfp4Matrix{reinterpret_cast<const std::uint8_t*>(w.data) + first / 2, row / 2, w.e8m0 + first / 32, row / 32,
                               static_cast<int>(w.rows), static_cast<int>(w.cols)};
        };
        packExpertMxfp4(l, mx(gate), mx(up), mx(down), dst);
        return;
    }
    if (!repacksInt4Exactly(l, gate, up, down)) {
        packExpert(l, gate, up, down, dst);
        return;
    }
    const auto check = [](const WeightMatrix& w, int rows, int cols, const char* what) {
        if (w.rows != rows || w.cols != cols || !w.int4Scales)
            throw Error(std::string("expert ") + what + " is " + std::to_string(w.rows) + "x" + std::to_string(w.cols) +
                        (w.int4Scales ? "" : " without scales") + ", expected " + std::to_string(rows) + "x" +
                        std::to_string(cols));
    };
    check(gate, l.inter, l.hidden, "gate_proj");
    check(up, l.inter, l.hidden, "up_proj");
    check(down, l.hidden, l.inter, "down_proj");
    repackExpert(l, gate, up, down, dst);
}

}  // namespace tandem::cpu
