#pragma once
// Launchers of our own GPU kernels (the large matrix products go through cuBLAS, see gemm.h).
// Activations are float32 row-major; GEMM inputs are bf16; positions come from device memory so a
// captured decode graph stays valid as the context grows.
//
// Split precision: a bf16 GEMM input of T rows can carry T more rows holding what bf16 rounding lost
// (lo = bf16(v - hi)). A GEMM over all 2T rows followed by launchPairSum then reproduces the float32
// product to ~16 mantissa bits, so routing and greedy choices match the float32 reference, at the
// price of a second, nearly free column in the memory-bound decode GEMMs. Kernels that write bf16
// inputs take `split` and write the lo rows `tokens` rows below the hi rows.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/expert_kernels.h"
#include "cuda/slot_control.h"
#include "core/router_spec.h"

namespace tandem::cuda {

using bf16 = __nv_bfloat16;

// Programmatic dependent launch for the kernels of a step (chained_launch.cuh): whether this GPU and
// build can use it, and turning it on for every launch that follows.
bool chainedLaunchesSupported();
void enableChainedLaunches(bool on);

// x[t] = table[ids[t]] (bf16 -> f32)
void launchEmbed(const int* ids, int tokens, const bf16* table, int hidden, float* x, cudaStream_t s);

// outF32 / outBf16 (either may be null) = x / rms(x) * weight, row by row.
void launchRmsNorm(const float* x, int ldx, const float* weight, float eps, int tokens, int width, float* outF32,
                   int ldF32, bf16* outBf16, int ldBf16, bool split, cudaStream_t s);

// out[t, i] = silu(gateUp[t, i]) * gateUp[t, inner + i]  (gate rows first, then up rows)
void launchSiluMul(const float* gateUp, int tokens, int inner, bf16* out, bool split, cudaStream_t s);

// The routed experts' hand-over, through host memory mapped into the GPU (no copy nodes): a layer's
// normalized hidden states and routing written out in one kernel, and the CPU's result (and the
// previous layer's deferred result, if any) added into the residual stream in one kernel.
void launchExportToHost(const float* hidden, int tokens, int width, const int* ids, const float* weights, int topK,
                        float* hostHidden, int* hostIds, float* hostWeights, cudaStream_t s);
void launchAddFromHost(const float* hostA, const float* hostB, float* x, long count, cudaStream_t s);
// y[t, :width] += bias for each of `tokens` rows ldy apart (GLM-4.5's q/k/v biases, gpt-oss's o_proj bias).
void launchAddBias(float* y, int ldy, int tokens, int width, const float* bias, cudaStream_t s);

// Decode's y = W x (or y += W x) for one token, W bf16 [n, k] row-major; with split, x's lo row (ldx
// below it) is added to x as it is read: one kernel for what a GEMM and a pair sum did. bias (n floats,
// may be null) is added to each row's result: gpt-oss's and GLM's projection biases, without a kernel of
// their own.
void launchGemv(const bf16* w, int n, int k, const bf16* x, int ldx, bool split, float* y, bool accumulate,
                cudaStream_t s, const float* bias = nullptr);

// The same for 8-bit weights (fp8.cu): w [n, k] of `format` with scales [n, scaleCols], one per row and
// block of blockCols columns, multiplied in float32. FP8 e4m3 keeps a checkpoint's block scales; int8
// (dense weights quantized at load) has one scale per row (scaleCols 1, blockCols k).
enum class Weight8 { E4M3, Int8 };
void launchGemv8(Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int n, int k,
                 const bf16* x, int ldx, bool split, float* y, bool accumulate, cudaStream_t s, const float* bias = nullptr);
// Prefill's 8-bit products: rows of w widened to bf16 hi rows, scaled as above, and, when lo is not null,
// the bf16 of what hi lost; int8 rows without their scales (scales null: integers, exact in bf16). Then,
// after a GEMM of [hi; lo] by the split input, launchSumQuadrants adds its products:
// y[t, j] (+)= rowScales[j] (when not null) x sum over a < wHalves, b < xHalves of p[b * tokens + t, a * n + j].
void launchDequant8(Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int rows, int k,
                    bf16* hi, bf16* lo, cudaStream_t s);
void launchSumQuadrants(const float* p, int ldp, int tokens, int n, int wHalves, int xHalves, const float* rowScales, float* y,
                        int ldy, bool accumulate, cudaStream_t s);

// out[t] = y[t] + y[tokens + t] (or +=, with accumulate): the two halves of a split GEMM.
// out may be y itself.
void launchPairSum(const float* y, int ldy, int tokens, int width, float* out, int ldOut, bool accumulate,
                   cudaStream_t s);
// The same, written as a bf16 GEMM input (split into hi and lo rows when `split`).
void launchPairSumToBf16(const float* y, int ldy, int tokens, int width, bf16* out, int ldOut, bool split,
                         cudaStream_t s);

// Rotary tables shared by the kernels: inverse frequencies [dim / 2] and the attention factor.
struct RopeParams {
    const float* invFreq;
    int dim;
    bool interleaved;
    float attentionFactor;
};

// A stream of the 8-bit KV cache (EngineOptions::kvCache = Int8, issue 28): int8 codes [positions][width],
// row-major as the float32 cache's rows, each row cut into groups of groupWidth values (GQA: a key head's
// headDim; MLA: the whole latent row, the whole rope row) that share one float scale, scales
// [positions][width / groupWidth]. Quantized as on the CPU (model/kv_cache.h, quantizeKvGroup): scale =
// the group's largest magnitude / 127, code = x * 127 / largest rounded to nearest; a zero group has zero
// codes and scale 0, a group with a NaN or infinity scale NaN. Null codes: the float32 cache.
struct Int8Rows {
    std::int8_t* codes = nullptr;
    float* scales = nullptr;
    int width = 0;
    int groupWidth = 0;
    __host__ __device__ explicit operator bool() const { return codes != nullptr; }
};

// GQA: qkv [tokens, (heads + 2 kvHeads) * headDim] as produced by one fused projection. Applies the
// optional per-head q/k RMSNorm and rotary embeddings in place, and writes keys and values of
// positions *start + t into the caches ([positions, kvHeads * headDim]), or, when kInt8 / vInt8 hold
// codes, into those 8-bit streams instead (groups of headDim).
void launchGqaPrepare(float* qkv, int tokens, int heads, int kvHeads, int headDim, const float* qNorm,
                      const float* kNorm, float eps, RopeParams rope, const int* start, float* kCache, float* vCache,
                      cudaStream_t s, Int8Rows kInt8 = {}, Int8Rows vInt8 = {});

// MLA: kv [tokens, ldkv] holds the compressed latent then the rotary key part. Writes the normalized
// latent and the rotated key of positions *start + t into the caches (or their 8-bit streams, one group a
// row, when latentInt8 holds codes). q [tokens, heads, nope + rope]: rotates the rotary part in place and
// writes the nope part as bf16 [tokens, heads, nope].
void launchMlaPrepare(const float* kv, int ldkv, float* q, int tokens, int heads, int nope, int kvLora,
                      const float* kvNorm, float eps, RopeParams rope, const int* start, float* latentCache,
                      float* ropeCache, bf16* qNope, bool split, cudaStream_t s, Int8Rows latentInt8 = {},
                      Int8Rows ropeInt8 = {});

// The rows [first, *start + extra) of an 8-bit stream as float32 rows [position][ld] of out (ld >= width):
// code * scale, for the kernels that read a float32 cache (prompt chunks, and decode where no kernel reads
// the codes themselves). first and extra are host values, *start the device's, so a captured step stays
// valid; the grid is sized for `capacity` positions. window > 0 (a sliding-window layer): only from the
// first row the step's first query attends to, *start - window + 1.
void launchDequantizeRows(Int8Rows rows, int first, const int* start, int extra, int capacity, float* out, int ld,
                          cudaStream_t s, int window = 0);
// The same rows [first, first + count) as a bf16 GEMM input [count][width] (lo rows `count` further with
// split): MLA's prompt passes decompress the latent from it.
void launchDequantizeRowsToBf16(Int8Rows rows, int first, int count, bf16* out, bool split, cudaStream_t s);

// Causal attention of `tokens` queries at positions *start + t over the cached context, one block per
// (head, token), online softmax. score(j) = (qA·keyA[j] + qB·keyB[j]) * scale; out = Σ p(j) value[j].
// keyB/qB may be null. Rows of a cache are `ldKey`/`ldValue` floats apart; a head reads its keys at
// keyHeadOffset(head) = (head / group) * keyHeadStride. window > 0 limits to the last `window` positions.
// sinks (gpt-oss), when not null: one logit per query head [heads] that joins every softmax as one more
// term attached to no value (the part of a split context that starts at its first position counts it).
struct AttentionArgs {
    const float* qA;  int ldqA; int qAHeadStride; int dimA;
    const float* qB;  int ldqB; int qBHeadStride; int dimB;
    const float* keyA; int ldKeyA;
    const float* keyB; int ldKeyB;
    const float* value; int ldValue; int dimV;
    int keyHeadStride;    // floats between heads' keys/values in a cache row (0: shared by all heads)
    int group;            // query heads per key head
    int heads;
    int tokens;
    const int* start;
    int window;
    float scale;
    const float* sinks;
    bf16* out; int ldOut; int outHeadStride;
    bool split;
    // Prefill on tensor cores (launchFlashPrefill), with split: P·V in one fp16 term, Q·K still split (a long
    // context's chunk, Tuning::gpuSplitAttentionUntil; mma.cuh's ValueForm::Half); `split` still says how
    // the output is stored.
    bool oneTermValues;
    // Flash-decoding: with splits > 1 the context is cut into that many ranges, each handled by its own
    // block (one query head has too little work to fill the GPU alone), and a second kernel combines
    // the partial softmaxes. partials holds tokens * heads * splits * (dimV + 2) floats; splits <= 64.
    int splits;
    float* partials;
    bool decodeKernel;  // one token with splits: the kernel written for decode (attention.cu)
    unsigned* partsDone;  // decode kernel: heads zeroed counters (one a key head or query head), left zeroed
    // GQA in the decode kernel (usesDecodeKernel) may prepare the step itself instead of
    // launchGqaPrepare: qA holds the raw query heads; each block normalizes (qNorm, optional) and
    // rotates its query head, and the blocks of the context's last part first write the position's
    // key (kNew's head, normalized with kNorm and rotated) and value (vNew's head) into the caches.
    bool prepare;
    const float* qNorm; const float* kNorm; float eps; RopeParams rope;
    const float* kNew; const float* vNew;  // raw key and value heads of the step's qkv row
    float* keyCache; float* valueCache;    // keyA and value, written
    bool noFlash;  // prefill: the scalar kernel even where launchFlashPrefill serves (Tuning::gpuFlashPrefill)
    // Decode: GQA runs a block per key head and part of the context, reading each key and value row once
    // for the key head's query heads; this keeps the kernel of a block per query head (to compare them,
    // scripts/check_attention.cu). MLA's absorbed form always runs on the latter.
    bool perHeadDecode;
    // Decode over the 8-bit cache (Int8Rows) read as codes by the kernel that serves it (keyHeadDecodeServes
    // for GQA heads of 128 or 64; mlaDecodeServes): keyInt8 and valueInt8 (MLA: keyInt8 the latent rows, which are
    // also the values, ropeInt8 the rope rows) instead of keyA, value and keyB. launchAttention refuses it
    // for any other kernel: the runner gives those float32 rows (launchDequantizeRows).
    bool int8Cache;
    Int8Rows keyInt8, valueInt8, ropeInt8;
};
// Whether launchAttention runs the decode kernel for these arguments.
inline bool usesDecodeKernel(const AttentionArgs& a) { return a.tokens == 1 && a.splits > 1 && a.decodeKernel; }
// Decode's splits (2..64) on a GPU of `multiprocessors`, for arguments of this shape (heads, group, dimA,
// dimB, dimV, keyHeadStride, perHeadDecode): one wave of the decode kernel that serves them. partials and
// partsDone are sized for them (heads * splits * (dimV + 2) floats, heads counters).
int decodeAttentionSplits(const AttentionArgs& shape, int multiprocessors);
void launchAttention(const AttentionArgs& a, cudaStream_t s);
// Decode by key head (attention_key_head_decode.cu): whether it serves arguments of this shape, its
// blocks a multiprocessor holds, and its launch (false, launching nothing, where it does not serve or
// the pointers are not 16-byte aligned). launchAttention tries it first for decode.
// With int8Cache, heads of 128 or 64 only (and not `prepare`).
bool keyHeadDecodeServes(const AttentionArgs& a);
int keyHeadDecodeBlocksPerMultiprocessor(const AttentionArgs& a);
bool launchKeyHeadDecode(const AttentionArgs& a, cudaStream_t s);
// MLA decode in the absorbed form on tensor cores (mla_decode.cu): a block per 16 query heads and part
// of the context reads each cached row once for them; a second kernel combines the parts. Whether it
// serves arguments of this shape (latent keys shared by the heads, up to 512 wide plus a rope part up
// to 64, values the latent itself; not perHeadDecode), its blocks a multiprocessor holds, and its launch
// (false, launching nothing, where it does not serve or rows are not 16-byte aligned). launchAttention
// tries it first for decode.
// With int8Cache, widths of multiples of 16 (the codes read in 16-byte chunks).
bool mlaDecodeServes(const AttentionArgs& a);
int mlaDecodeBlocksPerMultiprocessor(const AttentionArgs& a);
bool launchMlaDecode(const AttentionArgs& a, cudaStream_t s);
// Prefill (tokens > 1) on tensor cores for GQA heads of 32, 64 or 128 (attention_prefill.cu); false,
// launching nothing, for arguments it does not serve. launchAttention tries it first unless noFlash.
bool launchFlashPrefill(const AttentionArgs& a, cudaStream_t s);

// MLA prefill in the non-absorbed form on tensor cores (mla_prefill.cu): per head, q = [q_nope | q_rope]
// (q [tokens][heads], `qHeadStride` floats a head, the rope part rotated) against k = [k_nope | k_rope]
// and values v, causal, for the queries at positions start + t. k_nope and v come from `kv`, the
// decompressed latent (kv_b_proj's output, float32 [position - kvFirst][heads][nope + v]), for the
// pass's positions [kvFirst, kvFirst + kvCount); k_rope from the rope cache [position][ldRope], shared by
// the heads. A context decompressed in several passes (in order, the first from position 0) keeps each
// row's running softmax in `state` (tokens * heads * (vDim + 2) floats) between them; the last pass
// writes out [tokens][heads * vDim] as a bf16 GEMM input (lo rows `tokens` rows further with split).
struct MlaPrefillArgs {
    const float* q; int ldq; int qHeadStride;
    const float* kv; int ldkv; int kvHeadStride;
    const float* ropeKeys; int ldRope;
    int nope, rope, vDim, heads, tokens;
    int start;              // the first query's position (a host value: prompts are not captured in graphs)
    int kvFirst, kvCount;   // the pass's positions
    bool firstPass, lastPass;
    float* state;           // null when one pass holds the whole context
    float scale;
    bf16* out; int ldOut; int outHeadStride;
    bool split;
    bool oneTermValues;     // P·V in one fp16 term even with split (AttentionArgs::oneTermValues)
};
// Whether the kernel serves these head widths (up to nope 128, rope 64, v 128, multiples of 4).
bool mlaFlashPrefillServes(int nope, int rope, int vDim);
void launchMlaFlashPrefill(const MlaPrefillArgs& a, cudaStream_t s);
// Float32 rows [rows][width] (ldx apart) as a bf16 GEMM input (ldOut apart; the lo rows `rows` further
// with split).
void launchToBf16(const float* x, int ldx, int rows, int width, bf16* out, int ldOut, bool split, cudaStream_t s);

// Routing of every token: logits [tokens, experts] -> ids / weights [tokens, topK], heaviest first,
// exactly as model::routeToken does on the CPU. logitBias (gpt-oss's router bias, may be null) is added
// to the logits first, as model::routeTokens does; bias is DeepSeek-V3's correction bias (choice only).
void launchRouter(const float* logits, int tokens, int experts, const float* logitBias, const float* bias,
                  const RouterSpec& spec, int* ids, float* weights, cudaStream_t s);
// routed[e] = 1 if one of the `count` ids is e, else 0, for e < experts (prefill streaming's copy of
// only the routed experts; `routed` may be mapped host memory).
void launchMarkRouted(const int* ids, int count, int experts, int* routed, cudaStream_t s);
// Decode's MoE entry in one kernel: the post-attention RMSNorm of the residual row x (written to
// hF32 and, as a bf16 GEMM input, to hBf16 when they are not null), the router's float32 logits W h
// (W [experts, hidden]), the routing above into ids / weights and, with a control, the hand-over
// that launchExportToHost and launchSignal (host_sync.h) do otherwise: the row to hostHidden, then
// the slot's signal; ids / weights are then the slot's. blocksDone is one zeroed unsigned that the
// kernel leaves zeroed. Needs (hidden + 2 experts) floats of shared memory, at most 44 KB.
struct RouteDecodeArgs {
    const float* x;
    const float* normWeight;
    float eps;
    float* hF32;
    bf16* hBf16;
    bool split;
    const float* w;
    int experts, hidden;
    const float* logitBias;  // gpt-oss: added to the logits (may be null); `logits` keeps them without it
    const float* bias;
    RouterSpec spec;
    float* logits;
    unsigned* blocksDone;
    int* ids;
    float* weights;
    float* hostHidden;
    SlotControl* control;  // null: no hand-over
    std::uint64_t* counter;
    int layer;
    LayerClock* clock;
    // A layer the GPU holds wholly (expert_kernels.h), when `table` (each expert's device address) is not
    // null: the kernel also writes launchExpertsDecode's batch of the chosen experts, one group per
    // routing slot (slotExperts[j] = table[ids[j]], groupStart topK + 1 ints, the pair arrays topK
    // each), so no grouping kernel runs (decodeSlotBatch gives the batch).
    const std::uint8_t* const* table;
    const std::uint8_t** slotExperts;
    int* groupStart;
    int* pairToken;
    int* pairGroup;
    float* pairWeight;
    int* slotPair;
};
void launchRouterDecode(const RouteDecodeArgs& args, cudaStream_t s);
// The batch launchRouterDecode writes with a table: one token, topK groups of one pair each.
ExpertPairs decodeSlotBatch(const RouteDecodeArgs& args);

// MLA decode (one token), per head h of `heads`, with kvb the per-head [nope + vDim, latent] blocks
// `headStride` elements apart (W_k rows first, then W_v): qLatent[h] = W_k[h]ᵀ qNope[h] in float32
// (qNope bf16 [heads, nope], its lo row after it with split), and out[h] = W_v[h] ctx[h] as a bf16
// GEMM input (ctx bf16 [heads, latent] with its lo row after it; out [heads, vDim], lo after it).
// kvbLo, when not null, holds what bf16 lost of FP8 weights (gpu_weights.h), added to kvb as it is read.
void launchMlaAbsorb(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent,
                     const bf16* qNope, bool split, float* qLatent, cudaStream_t s);
void launchMlaValues(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent, int vDim,
                     const bf16* ctx, bool split, bf16* out, cudaStream_t s);

}  // namespace tandem::cuda
