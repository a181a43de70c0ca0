#pragma once
// What GpuRunner's files share (gpu_runner.cpp: buffers, the pass and its attention; gpu_runner_moe.cpp:
// the feed-forward block of MoE layers, the hand-over to the CPU, experts on the GPU and prefill streaming).
namespace tandem::cuda {

inline constexpr double kCpuTimeoutSeconds = 120.0;  // a GPU wait kernel gives up after this
// Routed experts on the GPU (expert_kernels.h): the decode kernels up to this many tokens, the tensor-core
// prefill kernels above, with activations split into Tuning::gpuExpertSplits bf16 terms (2: ~6.8e-6 per
// expert output, docs/GPU_EXPERTS.md; the rest of the GPU path measures ~5e-6).
inline constexpr int kDecodeExpertTokens = 4;

// Stages of a layer for TANDEM_GPU_PROFILE: a timestamp is taken at the start of each.
enum Stage { kAttnBegin, kAttnProjected, kAttnPrepared, kAttnScored, kAttnDone, kRouted, kCopiedOut, kSharedDone,
             kResultAdded, kStages };
// In decode the input norm runs in the previous layer's wait, and the hand-over in the router's kernel.
inline constexpr const char* kStageNames[kStages] = {"(norm +) q/kv projections", "rope, cache writes", "absorb (MLA) + attention",
                                              "values + o_proj", "norm + router (+ hand-over)", "copies to the CPU + signal",
                                              "(signal +) shared experts", "wait + add (+ next norm)", "(end)"};

}  // namespace tandem::cuda
