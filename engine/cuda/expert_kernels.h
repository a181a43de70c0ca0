#pragma once
// Routed experts on the GPU, computed straight from the packed layout of io/expert_layout.h: the same
// bytes as the store's expert files (or the CPU's packed experts), copied into device memory as they
// are. For the tokens routed to a layer's GPU experts:
//
//   out[t] (+)= sum over the slots s of token t, in slot order, of  weight[t, s] * y_s
//   y_s = down_e . (SiLU(gate_e . x[t]) * (up_e . x[t]))          e: the expert of slot s
//
// in float32 from float32 activations, deterministic (no float atomics: every sum has a fixed order).
// Two paths (docs/GPU_EXPERTS.md has the thread/data mappings and the figures):
//   decode   few tokens: CUDA cores, each pair streams its expert's bytes once with 16-byte loads and
//            float32 activations (float32 products of the exact dequantized weights);
//   prefill  many tokens per expert: tensor cores (mma.sync bf16) over tiles of 32 tokens, so each
//            weight block read from memory serves the whole tile; the activations are split into 2 or
//            3 bf16 terms (hi + lo [+ lo2]) so the products keep ~16 or ~24 bits of them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "io/expert_layout.h"

namespace tandem::cuda {

// io::ExpertLayout as plain data for the kernels (all offsets from an expert's first byte).
struct GpuExpertLayout {
    io::ExpertType type = io::ExpertType::BF16;
    int hidden = 0, inter = 0;
    int kBlock = 0;            // inputs per block: 32 (bf16), 64 (int8, int4)
    int blockBytes = 0;        // 1024, 1024, 576
    int hiddenPad = 0;         // gate/up K, a whole number of blocks
    int interPad = 0;          // down K, a multiple of 64
    int hiddenKBlocks = 0;
    int gateUpPanels = 0;      // interPad / 16
    int gateUpPanelBytes = 0;  // gate and up blocks of one panel (+ 32 float row scales for int8)
    int downPanels = 0;        // ceil(hidden / 16)
    int chunks = 0;            // 128-column chunks of down's K (the last may be 64 wide)
    std::int64_t downOffset = 0;
    std::int64_t fullChunkBytes = 0;
    std::int64_t downScalesOffset = 0;  // int8: one float per down row
    std::int64_t dataBytes = 0;         // bytes the kernels read per expert
};

GpuExpertLayout gpuExpertLayout(const io::ExpertLayout& layout);

// The (token, expert) pairs of one layer's launch, grouped by expert; everything in device memory.
// Pair i of group g (groupStart[g] <= i < groupStart[g + 1]) multiplies token pairToken[i] by the
// expert at weights[g]. Groups may be empty, so a launch can name every expert of the layer and be
// sized before the routing is known (launchGroupRoutes builds such a batch on the GPU).
struct ExpertPairs {
    int groups = 0;
    const std::uint8_t* const* weights = nullptr;  // [groups] each group's packed expert, 16-byte aligned
    const int* groupStart = nullptr;               // [groups + 1]; groupStart[groups] is the pair count
    const int* pairToken = nullptr;                // [maxPairs] row of x and out
    const int* pairGroup = nullptr;                // [maxPairs] group of each pair
    const float* pairWeight = nullptr;             // [maxPairs] routing weight
    int maxPairs = 0;                              // bound on groupStart[groups] (sizes grids and scratch)
    // [tokens, topK]: the pair of each routing slot, or -1 for a slot computed elsewhere (an expert on
    // the CPU): the final sum takes the slots in this order.
    const int* slotPair = nullptr;
    // [groups] the expert (of the layer) each group multiplies by, which picks its biases in an
    // ExpertEpilogue; null: group g is expert g (launchGroupRoutes' batches).
    const int* groupExpert = nullptr;
    int tokens = 0;
    int topK = 0;
};

// gpt-oss's experts (model::biasedExpert, cpu::ExpertEpilogue): biases and the clamped SwiGLU, so that
//   y_s = down_e . act(gate_e . x + gateBias_e, up_e . x + upBias_e) + downBias_e
//   act(g, u) = SiLU(g) * u, or with clampedSwiglu: g' = min(g, limit), u' = clamp(u, -limit, limit),
//               (u' + 1) * g' * sigmoid(alpha * g')
// Biases in device memory, float32, expert e's at e * inter (gate, up) and e * hidden (down); null: none.
// The default is the plain experts above.
struct ExpertEpilogue {
    const float* gateBias = nullptr;
    const float* upBias = nullptr;
    const float* downBias = nullptr;
    bool clampedSwiglu = false;
    float alpha = 1.702f;
    float limit = 7.0f;
};

// Builds a batch on the GPU from the router's output: ids / weights [tokens, topK] and a table of the
// layer's experts in device memory (expertWeights[e], null for an expert that is not there). The
// batch's groups are the table's entries (groups = experts, weights = expertWeights); pairs are in
// token-then-slot order within each group. groupStart holds experts + 1 ints, pairToken, pairGroup,
// pairWeight and slotPair tokens * topK each. At most 512 experts.
ExpertPairs launchGroupRoutes(const int* ids, const float* routeWeights, int tokens, int topK,
                              const std::uint8_t* const* expertWeights, int experts, int* groupStart, int* pairToken,
                              int* pairGroup, float* pairWeight, int* slotPair, cudaStream_t s);

// Decode: out[t, 0:hidden] (+)= the experts' sum above, x [tokens, ldx] float32 (ldx a multiple of 4,
// rows 16-byte aligned). Every pair reads its expert once (two pairs of one expert read it twice, the
// second time mostly from L2), so this is for one token or a few. Needs decodeScratchBytes. Its two
// kernels are launched chained when chained launches are on (kernels.h): the first waits for the
// kernels before it, the second loads weights before it waits for the first; what follows may start
// early and must wait (waitForPrevious) before it reads out.
std::size_t decodeScratchBytes(const GpuExpertLayout& l, int maxPairs);
// One token: after adding into out, the kernel's last block may also apply the RMSNorm that comes next
// (the next layer's input norm, or the final one) to the whole row: out * rsqrt(mean(out^2) + eps) *
// weight, as a bf16 GEMM input (hi, and lo after `hidden` values when split). blocksDone is one zeroed
// unsigned the kernel leaves zeroed.
struct DecodeNorm {
    const float* weight = nullptr;  // null: no norm
    float eps = 0;
    __nv_bfloat16* out = nullptr;
    bool split = false;
    unsigned* blocksDone = nullptr;
};
void launchExpertsDecode(const GpuExpertLayout& l, const ExpertPairs& batch, const float* x, int ldx, float* out,
                         int ldOut, bool accumulate, void* scratch, cudaStream_t s, const DecodeNorm& norm = {},
                         const ExpertEpilogue& epilogue = {});

// Prefill: the same for many tokens, with `splits` (2 or 3; 1 for int8 and int4 experts) bf16 terms per
// activation. Every 32 tokens
// of a group read the group's expert once. Needs prefillScratchBytes.
std::size_t prefillScratchBytes(const GpuExpertLayout& l, int tokens, int maxPairs, int groups, int splits);
void launchExpertsPrefill(const GpuExpertLayout& l, const ExpertPairs& batch, const float* x, int ldx, float* out,
                          int ldOut, bool accumulate, int splits, void* scratch, cudaStream_t s,
                          const ExpertEpilogue& epilogue = {});

}  // namespace tandem::cuda
