#pragma once
// What the attention kernels share (attention.cu's per-query-head kernels, attention_key_head_decode.cu's
// decode by key head): block and tile sizes, and how a decode step's context is cut into parts.
#include <cfloat>

#include "cuda/kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kTile = 64;
constexpr int kThreads = 256;
constexpr int kMaxSplits = 64;  // parts of a decode step's context (decodeAttentionSplits)
// MLA's tensor-core decode: one block per 16 heads and part, so V2-Lite's 16 heads need a part per
// multiprocessor (132 on the H200) to fill the GPU; its combine takes up to this many.
constexpr int kMaxMlaSplits = 256;

// The first position a query at lastPosition attends to (a sliding window starts later).
__device__ inline int firstAttended(const AttentionArgs& a, int lastPosition) {
    return a.window > 0 ? max(0, lastPosition - a.window + 1) : 0;
}

// Part `part` of `parts` equal shares of the positions a query at lastPosition attends to: [first, last].
__device__ inline void partRange(const AttentionArgs& a, int lastPosition, int parts, int part, int& first, int& last) {
    const int firstPosition = firstAttended(a, lastPosition);
    const int perPart = (lastPosition - firstPosition + parts) / parts;
    first = firstPosition + part * perPart;
    last = min(lastPosition, first + perPart - 1);
}

// The sink logit (gpt-oss) query head h's softmax starts from in part `part` of its context, or -FLT_MAX
// for none: only part 0 counts it (the parts' combine then counts it once), as a running max of the sink
// and a running sum of exp(sink - sink) = 1, attached to no value.
__device__ inline float sinkLogit(const AttentionArgs& a, int h, int part) {
    return a.sinks && part == 0 ? a.sinks[h] : -FLT_MAX;
}

// A decode step's parts: as many as the context has tiles, up to the grid's, so that while the context
// fits, each part walks one tile (one softmax step, one latency chain); the rest of the grid exits.
__device__ inline int decodeParts(const AttentionArgs& a, int lastPosition, int tile = kTile) {
    const int positions = lastPosition - firstAttended(a, lastPosition) + 1;
    return max(1, min(a.splits, (positions + tile - 1) / tile));
}

}  // namespace
}  // namespace tandem::cuda
