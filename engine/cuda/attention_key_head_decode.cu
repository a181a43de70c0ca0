// GQA decode by key head (issue 28): a block per key head and part of the context reads each cached key
// and value row once for all the query heads of its group (attention.cu's decode kernel reads them once
// per query head). Launched by launchAttention (attention.cu) where it serves.
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "cuda/attention_common.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/kv_int8.cuh"
#include "cuda/rope.cuh"

namespace tandem::cuda {

namespace {
// Decode for GQA by key head. attention.cu's decode kernel runs a block per query head, so the `group`
// query heads of a key head each read its keys and values: Qwen3-30B-A3B's 8 read every row 8 times, and at 16K
// positions a layer's float32 cache of 67 MB (16384 positions x 4 key heads x 256 floats x 4 B) was
// read as 537 MB, past the 50 MB L2 (~0.13 ms a layer at the H200's ~4 TB/s). Here a block serves one
// key head and one part of the context for all of its query heads, so each row is read once: the
// roofline at 16K is those 67 MB, ~14 us a layer at ~4.8 TB/s (56 us at 64K).
// Measured on the H200 (scripts/check_attention.cu, a launch with L2 flushed, Qwen3's shape): 16K 32 us
// (was 172), 64K 83 us (was 642), 512 13 us (was 13.5); the reads alone, through the same copies,
// take 19 and 62 us, so the arithmetic (2 x group x dim multiply-adds a position, on the FP32 units)
// is what is left to hide.
//
// A block of 8 warps walks its part in tiles of T positions that cp.async copies into shared memory,
// Stages - 1 tiles ahead, so the copies of the next tiles are in flight while the block computes on
// this one (a tile's 2 x T rows of dim floats, 64 KB at dim 128 and T 64); one block a multiprocessor
// (decodeAttentionSplits sizes the grid to one wave). Per tile:
//   scores: warp w takes slice w of the head's elements (dim / 8 of them) and each lane the positions
//     lane and lane + 32, so that every lane sums its part of q·k for all the heads from one read of
//     each key element (float4 reads; the query's are the same address for the whole warp); the 8
//     warps' parts go to shared memory (no shuffles: their sum is the softmax's first step);
//   softmax: warp w takes heads w and w + 8 (one running max and sum a head), sums the 8 parts of
//     each score and writes the weights position-major, so the value step reads a position's weights
//     for 4 heads in one load;
//   values: thread (slice, column) adds float4 column `column` of the positions slice, slice + S, ...
//     of the tile (S = 256 / (dim / 4) slices) times each head's weight into its own group x 4
//     accumulators, so each value row is read once from shared memory; the slices are summed once,
//     at the end.
// Then the part's unnormalized result goes to the partials (or, when the context is one part, the
// normalized one to the output), and the key head's last part to finish combines all of them for its
// query heads (partsDone per key head).
//
// Shared memory of the kernel for GM query heads (group <= GM), dim 32 * KD, tiles of T, Stages tiles
// in flight. Floats: the tiles (keys in rows of dim + 4, so that the lanes' float4 reads of 8 rows at
// a time fall in different banks; also the slices' accumulators at the end and the combine's weights),
// the query heads [GM][dim], the scores' parts [8][GM][T], weights [T][GM], the heads' factor, max and
// sum [GM each, padded], the rotary table [dim] and the new key [dim].
//
// The 8-bit cache (Q8: AttentionArgs::keyInt8, heads of 128 or 64): a tile's rows are copied as codes, keys in
// rows of dim + 16 bytes (a lane's 16-byte read of its row's 16 codes, 8 lanes a phase, falls in different
// banks; heads of 64: 8-byte reads of 8 codes, 2-way), values in rows of dim bytes, then the tile's key scales and value scales [T] each; a key's scale
// multiplies its score, a value's its weight (the softmax's sum takes the weights unscaled). A quarter of
// the float32 tile's bytes, so more tiles are in flight.
template <int GM, int KD, int T, int Stages, bool Q8 = false>
struct GroupDecodeShape {
    static constexpr int kDim = 32 * KD;
    static constexpr int kColumns = kDim / 4;            // float4 columns of a row
    static constexpr int kSlices = kThreads / kColumns;  // value step: threads on one column
    static constexpr int kWarps = kThreads / 32;
    static constexpr int kWarpDim = kDim / kWarps;                   // scores: elements a warp takes
    static constexpr int kKeyStride = kDim + 4;                      // floats between a tile's key rows
    static constexpr int kKeyStrideBytes = kDim + 16;                // Q8: bytes between a tile's key rows
    static constexpr int kStageBytes = T * kKeyStrideBytes + T * kDim + 2 * T * 4;  // Q8: codes, then scales
    static constexpr int kStage = Q8 ? kStageBytes / 4 : T * kKeyStride + T * kDim;  // floats: keys, then values
    static_assert(!Q8 || ((kWarpDim == 16 || kWarpDim == 8) && kStageBytes % 16 == 0), "Q8: a warp scores 16 or 8 codes of a row");
    static constexpr int kReduce = kSlices * GM * kDim;
    static constexpr int kTiles = std::max({Stages * kStage, kReduce, GM * kMaxSplits});
    static constexpr int kPad = (GM + 3) / 4 * 4;
    static constexpr int kFloats = kTiles + GM * kDim + kWarps * GM * T + GM * T + 3 * kPad + 2 * kDim;
    static constexpr std::size_t kBytes = kFloats * sizeof(float);
    static_assert(kSlices >= 1 && T % kSlices == 0, "every slice takes whole positions of a tile");
    static_assert(T == 32 || T == 64, "a lane scores one or two positions of a tile");
    static_assert(kWarpDim % 4 == 0, "warps score float4 columns");
    static_assert(Stages >= 2, "the next tile is copied while this one is computed");
    static constexpr bool kFits = kBytes <= 227 * 1024;  // a block's shared memory on sm_90
};

// 16 bytes from global to shared memory without the registers (and zeros, reading nothing, unless
// `valid`); the copies a thread issued before a commit form a group, waited for by count.
__device__ __forceinline__ void copyAsync16(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copyAsync16(void* dst, const void* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copyAsync4(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void waitCopies() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// normRotateHead for one head of 32 * KD elements in shared memory, by one warp (the key-head kernel
// prepares its group's query heads a warp each, not one after the other with the whole block), with the
// rotation's cos and sin of each pair at this position from `table`. The same arithmetic, except the
// order in which the squares are summed.
template <int KD>
__device__ void normRotateWarp(float* head, const float* norm, float eps, const RopeParams& rope, const float* table) {
    constexpr int D = 32 * KD;
    const int lane = threadIdx.x & 31;
    float x[KD];
#pragma unroll
    for (int i = 0; i < KD; ++i) x[i] = head[lane + 32 * i];
    if (norm) {
        float squares = 0.0f;
#pragma unroll
        for (int i = 0; i < KD; ++i) squares += x[i] * x[i];
        const float inv = 1.0f / sqrtf(warpSum(squares) / static_cast<float>(D) + eps);
#pragma unroll
        for (int i = 0; i < KD; ++i) x[i] = x[i] * inv * norm[lane + 32 * i];
        __syncwarp();
#pragma unroll
        for (int i = 0; i < KD; ++i) head[lane + 32 * i] = x[i];
    }
    __syncwarp();
    const int half = rope.dim / 2;
#pragma unroll
    for (int i = 0; i < KD; ++i) {
        const int d = lane + 32 * i;
        if (d < rope.dim) {
            const int p = rope.interleaved ? d / 2 : d % half;
            int first, second;
            ropePair(rope, p, first, second);
            const float c = table[2 * p], s = table[2 * p + 1];
            x[i] = d == first ? head[first] * c - head[second] * s : head[second] * c + head[first] * s;
        }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < KD; ++i) head[lane + 32 * i] = x[i];
    __syncwarp();
}

// Stores 4 outputs of head h from column 4 * column as bf16 GEMM inputs (one token).
__device__ __forceinline__ void storeBf16x4(const AttentionArgs& a, int h, int column, float4 v) {
    bf16* hi = a.out + static_cast<long>(h) * a.outHeadStride + 4 * column;
    bf16* lo = hi + static_cast<long>(a.tokens) * a.ldOut;
    storeBf16(v.x, hi, lo, a.split);
    storeBf16(v.y, hi + 1, lo + 1, a.split);
    storeBf16(v.z, hi + 2, lo + 2, a.split);
    storeBf16(v.w, hi + 3, lo + 3, a.split);
}

__device__ __forceinline__ void addScaled(float4& acc, float w, const float4& v) {
    acc.x += w * v.x;
    acc.y += w * v.y;
    acc.z += w * v.z;
    acc.w += w * v.w;
}

// The key-head decode kernel's partials: each query head's parts' weighted values [heads][splits][dim]
// (float4 rows), then their running max and sum [heads][splits][2]; heads * splits * (dim + 2) floats,
// as for the per-head kernel.
__device__ __forceinline__ float* groupPartialValues(const AttentionArgs& a, int h, int part) {
    return a.partials + (static_cast<long>(h) * a.splits + part) * a.dimV;
}
__device__ __forceinline__ float* groupPartialState(const AttentionArgs& a, int h, int part) {
    return a.partials + static_cast<long>(a.heads) * a.splits * a.dimV + (static_cast<long>(h) * a.splits + part) * 2;
}

template <int GM, int KD, int T, int Stages, int MinBlocks = 1, bool Q8 = false>
__global__ void __launch_bounds__(kThreads, MinBlocks) attentionGroupDecodeKernel(AttentionArgs a) {
    using Shape = GroupDecodeShape<GM, KD, T, Stages, Q8>;
    static_assert(Shape::kFits, "a block's shared memory on sm_90");
    constexpr int D = Shape::kDim, C4 = Shape::kColumns, S = Shape::kSlices, Warps = Shape::kWarps;
    constexpr int KS = Shape::kKeyStride, WD = Shape::kWarpDim;
    constexpr int HeadsPerWarp = (GM + Warps - 1) / Warps;  // softmax
    waitForPrevious();
    startNext();
    extern __shared__ float4 groupShared[];
    float* tiles = reinterpret_cast<float*>(groupShared);
    float* qs = tiles + Shape::kTiles;    // [GM][D]
    float* scoreParts = qs + GM * D;      // [Warps][GM][T]
    float* weights = scoreParts + Warps * GM * T;  // [T][GM]
    float* alphas = weights + T * GM;     // [GM]
    float* maxima = alphas + Shape::kPad;  // [GM]
    float* sums = maxima + Shape::kPad;    // [GM]
    float* table = sums + Shape::kPad;     // [D]: cos, sin of each rotary pair
    float* newKey = table + D;             // [D]
    const int kvHead = blockIdx.x, part = blockIdx.z, group = a.group, h0 = kvHead * group;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int position = *a.start;

    const int parts = decodeParts(a, position, T);
    if (part >= parts) return;
    int first, last;
    partRange(a, position, parts, part, first, last);
    const int tileCount = last >= first ? (last - first + T) / T : 0;
    const long headOffset = static_cast<long>(kvHead) * a.keyHeadStride;
    // prepare: the context's last part writes this position's key and value, which its last tile reads
    // (not with the 8-bit cache, whose step launchGqaPrepare writes).
    const bool writesNew = !Q8 && a.prepare && part == parts - 1;

    // Tile t's keys and values into its stage, tiles in order; rows past the part are zeros. Thread i
    // copies column i % C4 of the tile's rows i / C4, i / C4 + S, ...: its sources advance by S rows,
    // and by T rows a tile.
    const int rowInTile = threadIdx.x / C4;
    const long keyRows = static_cast<long>(S) * a.ldKeyA, valueRows = static_cast<long>(S) * a.ldValue;
    const float* keyFirst = a.keyA + headOffset + 4 * (threadIdx.x % C4) + static_cast<long>(first) * a.ldKeyA;
    const float* valueFirst = a.value + headOffset + 4 * (threadIdx.x % C4) + static_cast<long>(first) * a.ldValue;
    const float* keyNext = keyFirst + rowInTile * static_cast<long>(a.ldKeyA);
    const float* valueNext = valueFirst + rowInTile * static_cast<long>(a.ldValue);
    // Q8: thread i copies 16-byte chunk i % (dim / 16) of the tile's rows i / (dim / 16), + 256 / (dim / 16), ...
    // of the keys' and the values' codes; threads below T copy row i's key scale, the next T its value scale.
    constexpr int kChunks = Shape::kDim / 16, kChunkRows = kThreads / kChunks;
    const int codesWidth = a.keyInt8.width, scaleGroups = Q8 ? a.keyInt8.width / a.keyInt8.groupWidth : 1;
    const auto copyTileQ8 = [&](int t) {
        unsigned char* stage = reinterpret_cast<unsigned char*>(tiles) + (t % Stages) * Shape::kStageBytes;
        const int chunk = threadIdx.x % kChunks, row0 = threadIdx.x / kChunks;
        const long tileFirst = first + static_cast<long>(t) * T;
#pragma unroll
        for (int k = 0; k < T / kChunkRows; ++k) {
            const int row = row0 + k * kChunkRows;
            const bool valid = tileFirst + row <= last;
            const long at = (valid ? tileFirst + row : first) * codesWidth + headOffset + 16 * chunk;
            copyAsync16(stage + row * Shape::kKeyStrideBytes + 16 * chunk, a.keyInt8.codes + at, valid);
            copyAsync16(stage + T * Shape::kKeyStrideBytes + row * Shape::kDim + 16 * chunk, a.valueInt8.codes + at, valid);
        }
        float* scales = reinterpret_cast<float*>(stage + T * Shape::kKeyStrideBytes + T * Shape::kDim);  // [2][T]
        if (threadIdx.x < 2 * T) {
            const int row = threadIdx.x % T;
            const bool valid = tileFirst + row <= last;
            const long at = (valid ? tileFirst + row : first) * scaleGroups + kvHead;
            copyAsync4(scales + threadIdx.x, (threadIdx.x < T ? a.keyInt8.scales : a.valueInt8.scales) + at, valid);
        }
    };
    auto copyTile = [&](int t) {
        if constexpr (Q8) {
            copyTileQ8(t);
            return;
        }
        float* keys = tiles + (t % Stages) * Shape::kStage + rowInTile * KS + 4 * (threadIdx.x % C4);
        float* values = tiles + (t % Stages) * Shape::kStage + T * KS + rowInTile * D + 4 * (threadIdx.x % C4);
        const int rows = last - (first + t * T) - rowInTile;  // this thread's rows k * S <= rows are in the part
        const float* key = keyNext;
        const float* value = valueNext;
#pragma unroll
        for (int k = 0; k < T / S; ++k) {
            const bool valid = k * S <= rows;
            copyAsync16(keys + k * S * KS, valid ? key : keyFirst, valid);
            copyAsync16(values + k * S * D, valid ? value : valueFirst, valid);
            key += keyRows;
            value += valueRows;
        }
        keyNext = key;
        valueNext = value;
    };
    // The first tiles' copies go out before the query is read, except the tile holding the position
    // this block writes first.
    int issued = 0;
    for (const int early = min(Stages - 1, writesNew ? tileCount - 1 : tileCount); issued < early; ++issued) {
        copyTile(issued);
        commitCopies();
    }

    // Heads past the group (GM > group) are computed with zero queries, weights and factors, so that
    // the loops over the heads have no branches; their results are not written.
    for (int i = threadIdx.x; i < GM * D; i += kThreads) {
        const int g = i / D, d = i % D;
        qs[i] = g < group ? a.qA[static_cast<long>(h0 + g) * a.qAHeadStride + d] : 0.0f;
    }
    for (int i = threadIdx.x; i < T * GM; i += kThreads) weights[i] = 0.0f;
    if (threadIdx.x < GM) alphas[threadIdx.x] = 0.0f;
    if (a.prepare) {
        for (int p = threadIdx.x; p < a.rope.dim / 2; p += kThreads) ropeAngle(a.rope, position, p, table[2 * p], table[2 * p + 1]);
        if (writesNew)
            for (int d = threadIdx.x; d < D; d += kThreads) newKey[d] = a.kNew[kvHead * a.dimA + d];
        __syncthreads();
        for (int g = warp; g < group + (writesNew ? 1 : 0); g += Warps) {
            if (g < group)
                normRotateWarp<KD>(qs + g * D, a.qNorm, a.eps, a.rope, table);
            else
                normRotateWarp<KD>(newKey, a.kNorm, a.eps, a.rope, table);
        }
        if (writesNew) {
            __syncthreads();
            for (int d = threadIdx.x; d < D; d += kThreads) {
                a.keyCache[static_cast<long>(position) * a.ldKeyA + headOffset + d] = newKey[d];
                a.valueCache[static_cast<long>(position) * a.ldValue + headOffset + d] = a.vNew[kvHead * a.dimV + d];
            }
        }
    }
    // The query heads are in place and this position's key and value in the caches (this block's
    // copies below read them).
    __syncthreads();
    for (; issued < Stages - 1; ++issued) {
        if (issued < tileCount) copyTile(issued);
        commitCopies();
    }

    float4 acc[GM];
#pragma unroll
    for (int g = 0; g < GM; ++g) acc[g] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // A sink (gpt-oss) starts part 0's softmax of each head: max = sink; its exp(sink - max) joins the
    // sum once, after the lanes' shares are summed.
    float m[HeadsPerWarp], l[HeadsPerWarp];
#pragma unroll
    for (int k = 0; k < HeadsPerWarp; ++k) {
        const int g = warp + k * Warps;
        m[k] = g < group ? sinkLogit(a, h0 + g, part) : -FLT_MAX;
        l[k] = 0.0f;
    }
    const int column = threadIdx.x % C4, slice = threadIdx.x / C4;
    for (int t = 0; t < tileCount; ++t, ++issued) {
        if (issued < tileCount) copyTile(issued);
        commitCopies();
        waitCopies<Stages - 1>();  // tile t's group
        __syncthreads();
        const float* keys = tiles + (t % Stages) * Shape::kStage;
        const float* values = keys + T * KS;
        // Q8: the stage's codes and scales (Shape's layout).
        const unsigned char* keyCodes = reinterpret_cast<const unsigned char*>(keys);
        const unsigned char* valueCodes = keyCodes + T * Shape::kKeyStrideBytes;
        const float* keyScales = reinterpret_cast<const float*>(valueCodes + T * Shape::kDim);
        const float* valueScales = keyScales + T;
        const int n = min(T, last - (first + t * T) + 1);

        // This warp's part of the scores of positions lane + 32 r: elements warp * WD ... of each head.
        {
            float s[T / 32][GM];
#pragma unroll
            for (int r = 0; r < T / 32; ++r)
#pragma unroll
                for (int g = 0; g < GM; ++g) s[r][g] = 0.0f;
            // Q8: the warp's WD codes of each of this lane's rows, WD / 4 words.
            std::uint32_t codes[T / 32][WD / 4];
            if constexpr (Q8) {
#pragma unroll
                for (int r = 0; r < T / 32; ++r) {
                    const unsigned char* row = keyCodes + (lane + 32 * r) * Shape::kKeyStrideBytes + warp * WD;
                    if constexpr (WD == 16) {
                        const uint4 w = *reinterpret_cast<const uint4*>(row);
                        codes[r][0] = w.x;
                        codes[r][1] = w.y;
                        codes[r][2] = w.z;
                        codes[r][3] = w.w;
                    } else {
                        const uint2 w = *reinterpret_cast<const uint2*>(row);
                        codes[r][0] = w.x;
                        codes[r][1] = w.y;
                    }
                }
            }
#pragma unroll
            for (int c4 = 0; c4 < WD / 4; ++c4) {
                float4 k[T / 32];
#pragma unroll
                for (int r = 0; r < T / 32; ++r) {
                    if constexpr (Q8) {
                        k[r] = codesToFloat4(codes[r][c4]);
                    } else {
                        k[r] = *reinterpret_cast<const float4*>(keys + (lane + 32 * r) * KS + warp * WD + 4 * c4);
                    }
                }
#pragma unroll
                for (int g = 0; g < GM; ++g) {
                    const float4 q = *reinterpret_cast<const float4*>(qs + g * D + warp * WD + 4 * c4);
#pragma unroll
                    for (int r = 0; r < T / 32; ++r)
                        s[r][g] = fmaf(q.w, k[r].w, fmaf(q.z, k[r].z, fmaf(q.y, k[r].y, fmaf(q.x, k[r].x, s[r][g]))));
                }
            }
#pragma unroll
            for (int g = 0; g < GM; ++g)
#pragma unroll
                for (int r = 0; r < T / 32; ++r) scoreParts[(warp * GM + g) * T + lane + 32 * r] = s[r][g];
        }
        __syncthreads();

        // The online softmax of each head over the tile (as softmaxTile) once its scores' parts are
        // summed; weights position-major.
#pragma unroll
        for (int hk = 0; hk < HeadsPerWarp; ++hk) {
            const int g = warp + hk * Warps;
            if (g >= group) break;
            float v[T / 32], e[T / 32];
            float tileMax = -FLT_MAX;
#pragma unroll
            for (int r = 0; r < T / 32; ++r) {
                const int jj = lane + 32 * r;
                float score = 0.0f;
#pragma unroll
                for (int w = 0; w < Warps; ++w) score += scoreParts[(w * GM + g) * T + jj];
                if constexpr (Q8) score *= keyScales[jj];
                v[r] = jj < n ? score * a.scale : -FLT_MAX;
                tileMax = fmaxf(tileMax, v[r]);
            }
            const float mNew = fmaxf(m[hk], warpMax(tileMax));
            const float alpha = expf(m[hk] - mNew);
            float tileSum = 0.0f;
#pragma unroll
            for (int r = 0; r < T / 32; ++r) {
                e[r] = lane + 32 * r < n ? expf(v[r] - mNew) : 0.0f;
                tileSum += e[r];
                weights[(lane + 32 * r) * GM + g] = Q8 ? e[r] * valueScales[lane + 32 * r] : e[r];
            }
            // Each lane's share of the sum; the warp's total is summed once, after the last tile.
            l[hk] = l[hk] * alpha + tileSum;
            m[hk] = mNew;
            if (lane == 0) alphas[g] = alpha;
        }
        __syncthreads();

        // This thread's slice of the tile's value rows, for every head.
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            const float alpha = alphas[g];
            acc[g].x *= alpha;
            acc[g].y *= alpha;
            acc[g].z *= alpha;
            acc[g].w *= alpha;
        }
#pragma unroll
        for (int r = 0; r < T / S; ++r) {
            const int jj = slice + r * S;
            float4 v;
            if constexpr (Q8)
                v = codesToFloat4(reinterpret_cast<const std::uint32_t*>(valueCodes + jj * D)[column]);
            else
                v = reinterpret_cast<const float4*>(values + jj * D)[column];
            float w[GM];
            if constexpr (GM % 4 == 0) {
#pragma unroll
                for (int g4 = 0; g4 < GM / 4; ++g4) {
                    const float4 x = reinterpret_cast<const float4*>(weights + jj * GM)[g4];
                    w[4 * g4] = x.x;
                    w[4 * g4 + 1] = x.y;
                    w[4 * g4 + 2] = x.z;
                    w[4 * g4 + 3] = x.w;
                }
            } else {
#pragma unroll
                for (int g = 0; g < GM; ++g) w[g] = weights[jj * GM + g];
            }
#pragma unroll
            for (int g = 0; g < GM; ++g) addScaled(acc[g], w[g], v);
        }
        __syncthreads();  // the stage is free for the copy of tile t + Stages
    }

    // Each head's running max and sum, and the slices' accumulators summed.
#pragma unroll
    for (int hk = 0; hk < HeadsPerWarp; ++hk) {
        const int g = warp + hk * Warps;
        if (g >= group) break;
        float sum = warpSum(l[hk]);
        const float sink = sinkLogit(a, h0 + g, part);
        if (sink > -FLT_MAX) sum += expf(sink - m[hk]);  // m[hk] >= sink: it started there
        if (lane == 0) {
            maxima[g] = m[hk];
            sums[g] = sum;
        }
    }
    float4* slices = reinterpret_cast<float4*>(tiles);  // [S][GM][C4]
#pragma unroll
    for (int g = 0; g < GM; ++g) slices[(slice * GM + g) * C4 + column] = acc[g];
    __syncthreads();
    for (int i = threadIdx.x; i < group * C4; i += kThreads) {
        const int g = i / C4, c = i % C4;
        float4 v = slices[g * C4 + c];
#pragma unroll
        for (int z = 1; z < S; ++z) {
            const float4 x = slices[(z * GM + g) * C4 + c];
            v.x += x.x;
            v.y += x.y;
            v.z += x.z;
            v.w += x.w;
        }
        if (parts == 1) {
            // The whole context in one part (short contexts): normalized here, without the partials.
            const float inv = 1.0f / sums[g];
            storeBf16x4(a, h0 + g, c, make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv));
        } else {
            reinterpret_cast<float4*>(groupPartialValues(a, h0 + g, part))[c] = v;
        }
    }
    if (parts == 1) return;
    if (threadIdx.x < group) {
        float* state = groupPartialState(a, h0 + threadIdx.x, part);
        state[0] = maxima[threadIdx.x];
        state[1] = sums[threadIdx.x];
    }
    // The key head's last part to finish combines the parts of all its query heads.
    __shared__ bool lastPart;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) lastPart = atomicAdd(a.partsDone + kvHead, 1u) == static_cast<unsigned>(parts) - 1;
    __syncthreads();
    if (!lastPart) return;
    __threadfence();

    // Each part's weight exp(m_z - m) / l for each head (a warp a head, two parts a lane; L2 loads: other
    // blocks wrote them), then the weighted sums of the parts' values.
    float* partWeights = tiles;  // [GM][kMaxSplits]
    for (int g = warp; g < group; g += Warps) {
        float mz[2], lz[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int z = lane + 32 * r;
            const float* state = groupPartialState(a, h0 + g, min(z, parts - 1));
            mz[r] = z < parts ? __ldcg(state) : -FLT_MAX;
            lz[r] = z < parts ? __ldcg(state + 1) : 0.0f;
        }
        const float mAll = warpMax(fmaxf(mz[0], mz[1]));
        float ez[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) ez[r] = lane + 32 * r < parts ? expf(mz[r] - mAll) : 0.0f;
        const float inv = 1.0f / warpSum(lz[0] * ez[0] + lz[1] * ez[1]);
#pragma unroll
        for (int r = 0; r < 2; ++r)
            if (lane + 32 * r < parts) partWeights[g * kMaxSplits + lane + 32 * r] = ez[r] * inv;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < group * C4; i += kThreads) {
        const int g = i / C4, c = i % C4;
        const float4* rows = reinterpret_cast<const float4*>(groupPartialValues(a, h0 + g, 0)) + c;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
        for (int z = 0; z < parts; ++z) addScaled(v, partWeights[g * kMaxSplits + z], __ldcg(rows + z * C4));
        storeBf16x4(a, h0 + g, c, v);
    }
    if (threadIdx.x == 0) a.partsDone[kvHead] = 0;
}

// The key-head kernel for one shape: launch, and how many of its blocks a multiprocessor holds.
template <int GM, int KD, int T, int Stages, int MinBlocks = 1, bool Q8 = false>
void configureGroupDecode() {
    static const cudaError_t configured =
        cudaFuncSetAttribute(attentionGroupDecodeKernel<GM, KD, T, Stages, MinBlocks, Q8>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(GroupDecodeShape<GM, KD, T, Stages, Q8>::kBytes));
    TANDEM_CUDA_CHECK(configured);
}

template <int GM, int KD, int T, int Stages, int MinBlocks = 1, bool Q8 = false>
void launchGroupDecode(const AttentionArgs& a, cudaStream_t s) {
    configureGroupDecode<GM, KD, T, Stages, MinBlocks, Q8>();
    launchChained(attentionGroupDecodeKernel<GM, KD, T, Stages, MinBlocks, Q8>, dim3(a.heads / a.group, 1, a.splits), kThreads,
                  GroupDecodeShape<GM, KD, T, Stages, Q8>::kBytes, s, a);
}

template <int GM, int KD, int T, int Stages, int MinBlocks = 1, bool Q8 = false>
int groupDecodeBlocksPerMultiprocessor() {
    configureGroupDecode<GM, KD, T, Stages, MinBlocks, Q8>();
    int blocks = 0;
    TANDEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks,
                                                                    attentionGroupDecodeKernel<GM, KD, T, Stages, MinBlocks, Q8>,
                                                                    kThreads, GroupDecodeShape<GM, KD, T, Stages, Q8>::kBytes));
    return blocks;
}

// Tiles per head width: 64 positions, and 32 at width 256. At width 128 two stages (one tile copied
// while the other is computed, 133 KB) measured a little faster on the H200 than three (3-5%: 31.7 against
// 33.5 us at 16K, 82.6 against 83.7 at 64K; tiles of 32, three stages or two blocks a multiprocessor were
// slower still); the narrower heads' tiles are smaller, so three stages keep as many bytes in flight;
// at width 256 three where they fit (not for 16 heads).
template <int GM, int KD>
struct GroupDecodeTiling {
    static constexpr int kTile = KD == 8 ? 32 : 64;
    static constexpr int kStages = KD == 4 || !GroupDecodeShape<GM, KD, kTile, 3>::kFits ? 2 : 3;
};

struct GroupDecodeEntry {
    void (*launch)(const AttentionArgs&, cudaStream_t);
    int (*blocksPerMultiprocessor)();
};

template <int GM, int KD>
constexpr GroupDecodeEntry groupDecodeEntryFor() {
    using Tiling = GroupDecodeTiling<GM, KD>;
    return {launchGroupDecode<GM, KD, Tiling::kTile, Tiling::kStages>,
            groupDecodeBlocksPerMultiprocessor<GM, KD, Tiling::kTile, Tiling::kStages>};
}

// The 8-bit cache's kernel (heads of 128: Qwen3-MoE, Mixtral, GLM-4.5; of 64: gpt-oss; other widths read
// float32 rows the runner dequantizes): tiles of 64 positions, four in flight (a stage is 18 KB at 128,
// against the float32 tile's 66 KB). Measured on the H200 (check_attention, Qwen3's shape, L2 flushed):
// 23.7 us after 16K (float32: 28-32.5), 60.1 after 64K (83.0): a quarter of the bytes but the same
// multiply-adds on the FP32 units, so it is bound by its instructions (1.15 TB/s of codes).
constexpr int kQ8Stages = 4;
template <int GM, int KD>
constexpr GroupDecodeEntry groupDecodeQ8EntryFor() {
    return {launchGroupDecode<GM, KD, 64, kQ8Stages, 1, true>, groupDecodeBlocksPerMultiprocessor<GM, KD, 64, kQ8Stages, 1, true>};
}

// Whether the key-head kernel serves arguments of this shape: GQA (keys per key head, no second key
// part) with heads of 32, 64, 128 or 256 and up to 16 query heads per key head.
bool groupDecodeServes(const AttentionArgs& a) {
    const bool width = a.dimA == 32 || a.dimA == 64 || a.dimA == 128 || a.dimA == 256;
    return !a.perHeadDecode && a.dimB == 0 && a.keyHeadStride > 0 && a.dimV == a.dimA && width && a.group >= 1 &&
           a.group <= 16 && a.heads % a.group == 0;
}

// ... and whether its 16-byte copies and loads are aligned (the 8-bit cache: its codes' rows).
bool groupDecodeAligned(const AttentionArgs& a) {
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (a.int8Cache)  // a key head is one group: its scale is scales[position * heads + head]
        return a.keyInt8.width % 16 == 0 && a.keyInt8.width == a.valueInt8.width && a.keyInt8.groupWidth == a.dimA &&
               a.valueInt8.groupWidth == a.dimA && a.keyHeadStride == a.dimA && aligned(a.keyInt8.codes) &&
               aligned(a.valueInt8.codes) && aligned(a.partials);
    return a.ldKeyA % 4 == 0 && a.ldValue % 4 == 0 && a.keyHeadStride % 4 == 0 && aligned(a.keyA) && aligned(a.value) &&
           aligned(a.partials);
}

// The kernel for a group of up to 1, 2, 4, 8 or 16 query heads (the next power of two: Qwen3's 8,
// Mixtral's 4, GLM-4.5-Air's 12 on the 16 kernel) and a head width served.
GroupDecodeEntry groupDecodeEntry(int group, int dim, bool int8Cache) {
    if (int8Cache) {
        static constexpr GroupDecodeEntry q8[2][5] = {
            {groupDecodeQ8EntryFor<1, 2>(), groupDecodeQ8EntryFor<2, 2>(), groupDecodeQ8EntryFor<4, 2>(), groupDecodeQ8EntryFor<8, 2>(),
             groupDecodeQ8EntryFor<16, 2>()},
            {groupDecodeQ8EntryFor<1, 4>(), groupDecodeQ8EntryFor<2, 4>(), groupDecodeQ8EntryFor<4, 4>(), groupDecodeQ8EntryFor<8, 4>(),
             groupDecodeQ8EntryFor<16, 4>()},
        };
        return q8[dim == 128 ? 1 : 0][group <= 1 ? 0 : group <= 2 ? 1 : group <= 4 ? 2 : group <= 8 ? 3 : 4];
    }
    static constexpr GroupDecodeEntry table[5][4] = {
        {groupDecodeEntryFor<1, 1>(), groupDecodeEntryFor<1, 2>(), groupDecodeEntryFor<1, 4>(), groupDecodeEntryFor<1, 8>()},
        {groupDecodeEntryFor<2, 1>(), groupDecodeEntryFor<2, 2>(), groupDecodeEntryFor<2, 4>(), groupDecodeEntryFor<2, 8>()},
        {groupDecodeEntryFor<4, 1>(), groupDecodeEntryFor<4, 2>(), groupDecodeEntryFor<4, 4>(), groupDecodeEntryFor<4, 8>()},
        {groupDecodeEntryFor<8, 1>(), groupDecodeEntryFor<8, 2>(), groupDecodeEntryFor<8, 4>(), groupDecodeEntryFor<8, 8>()},
        {groupDecodeEntryFor<16, 1>(), groupDecodeEntryFor<16, 2>(), groupDecodeEntryFor<16, 4>(),
         groupDecodeEntryFor<16, 8>()},
    };
    const int g = group <= 1 ? 0 : group <= 2 ? 1 : group <= 4 ? 2 : group <= 8 ? 3 : 4;
    const int d = dim == 32 ? 0 : dim == 64 ? 1 : dim == 128 ? 2 : 3;
    return table[g][d];
}


}  // namespace

bool keyHeadDecodeServes(const AttentionArgs& a) {
    return groupDecodeServes(a) && (!a.int8Cache || ((a.dimA == 128 || a.dimA == 64) && !a.prepare));
}

int keyHeadDecodeBlocksPerMultiprocessor(const AttentionArgs& a) {
    return groupDecodeEntry(a.group, a.dimA, a.int8Cache).blocksPerMultiprocessor();
}

bool launchKeyHeadDecode(const AttentionArgs& a, cudaStream_t s) {
    if (!keyHeadDecodeServes(a) || !groupDecodeAligned(a)) return false;
    groupDecodeEntry(a.group, a.dimA, a.int8Cache).launch(a, s);
    return true;
}

}  // namespace tandem::cuda
