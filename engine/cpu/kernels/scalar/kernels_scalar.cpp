// The portable reference kernels: plain loops over the packed layout, accumulating in double, with the
// float32 activations as they are for BF16 experts. Every other level is tested against these, and
// they run where no SIMD level is available.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <emmintrin.h>

#include "cpu/kernels/expert_kernels.h"
#include "cpu/half_float.h"
#include "io/dtype.h"

namespace tandem::cpu {

namespace {

// Output o of one block against activation row x starting at column k0. INT8 returns the exact integer
// sum of (u - 128) * q; INT4 and MXFP4 the group-scaled sum (times the activation scale later).
double blockDot(const ExpertLayout& l, const std::byte* block, int o, const std::byte* x, int k0) {
    switch (l.type) {
    case ExpertType::BF16: {
        double s = 0.0;
        const auto* xs = reinterpret_cast<const float*>(x) + k0;
        for (int kk = 0; kk < 32; ++kk) {
            std::uint16_t w;
            std::memcpy(&w, block + (kk / 2) * 64 + o * 4 + (kk % 2) * 2, 2);
            s += static_cast<double>(bf16Value(w)) * xs[kk];
        }
        return s;
    }
    case ExpertType::INT8: {
        std::int64_t s = 0;
        const auto* xs = reinterpret_cast<const std::int8_t*>(x) + k0;
        for (int kk = 0; kk < 64; ++kk) {
            const auto u = static_cast<std::uint8_t>(block[(kk / 4) * 64 + o * 4 + kk % 4]);
            s += static_cast<std::int64_t>(static_cast<int>(u) - 128) * xs[kk];
        }
        return static_cast<double>(s);
    }
    case ExpertType::INT4:
    case ExpertType::MXFP4: {
        // INT4: (n - 8) * fp16 scale; MXFP4: 2v * bf16 scale 2^(e - 128) (io/expert_layout.h).
        const bool fp4 = l.type == ExpertType::MXFP4;
        double s = 0.0;
        const auto* xs = reinterpret_cast<const std::int8_t*>(x) + k0;
        for (int g = 0; g < 2; ++g) {
            std::int64_t d = 0;
            for (int i = 0; i < 32; ++i) {
                const int high = i / 16, v = (i % 16) / 4, j = i % 4;
                const auto byte = static_cast<std::uint8_t>(block[(4 * g + v) * 64 + o * 4 + j]);
                const int n = high ? byte >> 4 : byte & 0xf;
                d += static_cast<std::int64_t>(fp4 ? kFp4Doubled[n] : n - 8) * xs[32 * g + i];
            }
            std::uint16_t h;
            std::memcpy(&h, block + 512 + (g * 16 + o) * 2, 2);
            s += static_cast<double>(fp4 ? bf16Value(h) : io::f16ToFloat(h)) * static_cast<double>(d);
        }
        return s;
    }
    }
    return 0.0;
}

// The intermediate value of row i from gate's and up's products (the epilogue's definition).
double activate(double g, double u, const GateUpEpilogue* e, int i) {
    if (e) {
        if (e->gateBias) g += e->gateBias[i];
        if (e->upBias) u += e->upBias[i];
        if (e->activation == GatedActivation::ClampedSwiglu) {
            const double limit = e->limit;
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
            return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(e->alpha) * g));
        }
    }
    return g / (1.0 + std::exp(-g)) * u;
}

const std::byte* row(const KernelRows& x, int r) { return x.data + static_cast<std::size_t>(r) * x.stride; }

void gateUp(const GateUpCall& c) {
    const ExpertLayout& l = *c.layout;
    for (int p = 0; p < c.panelCount; ++p) {
        const std::byte* panel = c.panels + static_cast<std::size_t>(p) * l.gateUpPanelBytes;
        const auto* rowScale = reinterpret_cast<const float*>(panel + static_cast<std::size_t>(l.hiddenKBlocks()) * 2 * l.blockBytes);
        for (int r = 0; r < c.x.rows; ++r)
            for (int o = 0; o < kPanelRows; ++o) {
                double g = 0.0, u = 0.0;
                for (int kb = 0; kb < l.hiddenKBlocks(); ++kb) {
                    g += blockDot(l, panel + (2 * kb) * l.blockBytes, o, row(c.x, r), kb * l.kBlock);
                    u += blockDot(l, panel + (2 * kb + 1) * l.blockBytes, o, row(c.x, r), kb * l.kBlock);
                }
                if (l.type != ExpertType::BF16) {
                    g *= c.x.scale[r];
                    u *= c.x.scale[r];
                }
                if (l.type == ExpertType::INT8) {
                    g *= rowScale[o];
                    u *= rowScale[kPanelRows + o];
                }
                const int i = (c.firstPanel + p) * kPanelRows + o;
                c.act[r * c.actStride + i] = static_cast<float>(activate(g, u, c.epilogue, i));
            }
    }
}

void down(const DownCall& c) {
    const ExpertLayout& l = *c.layout;
    const std::size_t base = l.chunkOffset(c.firstChunk);
    for (int q = c.firstPanel; q < c.firstPanel + c.panelCount; ++q)
        for (int r = 0; r < c.act.rows; ++r)
            for (int o = 0; o < kPanelRows && q * kPanelRows + o < l.hidden; ++o) {
                const int n = q * kPanelRows + o;
                double y = 0.0;
                for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) {
                    const std::byte* panel = c.chunks + (l.chunkOffset(ch) - base) + static_cast<std::size_t>(q) * l.chunkPanelBytes(ch);
                    for (int kb = 0; kb < l.chunkKBlocks(ch); ++kb)
                        y += blockDot(l, panel + kb * l.blockBytes, o, row(c.act, r), ch * kChunkCols + kb * l.kBlock);
                }
                if (l.type != ExpertType::BF16) y *= c.act.scale[r];
                if (l.type == ExpertType::INT8) y *= c.rowScales[n];
                c.dest[r][n] += static_cast<float>(c.weight[r] * y);
            }
}

ExpertKernels makeScalar() {
    ExpertKernels k;
    k.isa = Isa::Scalar;
    k.bf16Activations = Bf16Activations::Float32;
    for (int t = 0; t < kExpertTypeCount; ++t) {
        k.gemv[t] = {gateUp, down};
        k.gemm[t] = {gateUp, down};
        k.gemmMinRows[t] = 1 << 30;  // one kernel either way
    }
    return k;
}

}  // namespace

const ExpertKernels& scalarKernels() {
    static const ExpertKernels k = makeScalar();
    return k;
}

std::uint64_t streamRead(const std::byte* data, std::size_t bytes) {
    // Eight independent 16-byte accumulators keep enough loads in flight to saturate DRAM.
    __m128i acc[8];
    for (auto& a : acc) a = _mm_setzero_si128();
    std::size_t i = 0;
    for (; i + 128 <= bytes; i += 128)
        for (int j = 0; j < 8; ++j)
            acc[j] = _mm_xor_si128(acc[j], _mm_load_si128(reinterpret_cast<const __m128i*>(data + i + 16 * j)));
    for (int j = 1; j < 8; ++j) acc[0] = _mm_xor_si128(acc[0], acc[j]);
    std::uint64_t out[2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), acc[0]);
    return out[0] ^ out[1];
}

}  // namespace tandem::cpu
