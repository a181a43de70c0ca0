#pragma once
// Helpers the SIMD kernel files share: up to NT activation rows gathered from a kernel call, and
// running a row-count-templated body over all rows in chunks. Header-only with internal linkage, so
// each kernel file compiles its own copy with its own instruction set.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cpu/kernels/expert_kernels.h"

namespace tandem::cpu {
namespace {

template <int NT>
struct Rows {
    const std::byte* x[NT];               // activation row, column 0 (BF16 split: the hi half)
    const std::byte* lo[NT];              // BF16 split: the lo half, column 0
    float scale[NT];                      // INT8/INT4: activation scale
    const std::int32_t* groupSums[NT];    // INT8/INT4: 32-column sums, group 0
    std::int32_t sum[NT];                 // INT8: sum of q over the columns this call reads
    float* out[NT];                       // gate/up: act row; down: destination row
    float weight[NT];                     // down: routing weight
};

template <int NT>
inline Rows<NT> rowsOf(const KernelRows& k, int r0, int firstGroup, int groups) {
    Rows<NT> in{};
    for (int t = 0; t < NT; ++t) {
        const int r = r0 + t;
        in.x[t] = k.data + static_cast<std::size_t>(r) * k.stride;
        in.lo[t] = in.x[t] + k.loOffset;
        if (k.scale) {
            in.scale[t] = k.scale[r];
            in.groupSums[t] = k.groupSums + static_cast<std::size_t>(r) * k.groupSumStride;
            std::int32_t s = 0;
            for (int g = firstGroup; g < firstGroup + groups; ++g) s += in.groupSums[t][g];
            in.sum[t] = s;
        }
    }
    return in;
}

template <int NT>
inline Rows<NT> gateUpRows(const GateUpCall& c, int r0) {
    const ExpertLayout& l = *c.layout;
    Rows<NT> in = rowsOf<NT>(c.x, r0, 0, l.type == ExpertType::INT8 ? l.hiddenPad / kActGroup : 0);
    for (int t = 0; t < NT; ++t) in.out[t] = c.act + static_cast<std::size_t>(r0 + t) * c.actStride;
    return in;
}

template <int NT>
inline Rows<NT> downRows(const DownCall& c, int r0) {
    const ExpertLayout& l = *c.layout;
    int cols = 0;
    for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) cols += l.chunkCols(ch);
    Rows<NT> in = rowsOf<NT>(c.act, r0, c.firstChunk * kChunkCols / kActGroup,
                             l.type == ExpertType::INT8 ? cols / kActGroup : 0);
    for (int t = 0; t < NT; ++t) {
        in.out[t] = c.dest[r0 + t];
        in.weight[t] = c.weight[r0 + t];
    }
    return in;
}

template <int N, class F>
inline void callTail(int n, int r0, F& f) {
    if constexpr (N > 0) {
        if (n == N)
            f.template operator()<N>(r0);
        else
            callTail<N - 1>(n, r0, f);
    }
}

// f.operator()<NT>(r0) for consecutive chunks of at most MaxRows rows covering [0, rows).
template <int MaxRows, class F>
inline void forRowChunks(int rows, F&& f) {
    int r0 = 0;
    for (; r0 + MaxRows <= rows; r0 += MaxRows) f.template operator()<MaxRows>(r0);
    callTail<MaxRows - 1>(rows - r0, r0, f);
}

// Decode's down (the GEMV kernels) takes a chunk at a time and in it the pieces of up to kRunPanels
// consecutive panels, one run of weights (downRuns in the AVX-512 and AVX2 kernels). Reading a panel at
// a time over every chunk instead took int8 and bf16 decode from 62-86% of the bandwidth probe to 47-56%
// on Zen 4 and matched it on the Xeon (docs/BENCHMARKS.md), so that order is gone.
inline constexpr int kRunPanels = 32;

inline int validRows(const ExpertLayout& l, int panel) {
    const int v = l.hidden - panel * kPanelRows;
    return v < kPanelRows ? v : kPanelRows;
}

}  // namespace
}  // namespace tandem::cpu
