#pragma once
// How the engine computes, never what: the kernels' blocking, prefetch distances, work split and the
// GPU path's modes. Every default is the winner of a measured comparison in docs/BENCHMARKS.md; the
// TANDEM_* environment variables override them for benchmark runs (and tests), read once per process.
// tandem-cli --version and bench print the settings that differ from the defaults.
//
//   const tandem::Tuning& t = tandem::tuning();   // throws tandem::Error for a malformed variable
#include <string>
#include <vector>

namespace tandem {

struct Tuning {
    // CPU expert kernels
    std::string cpuIsa;             // TANDEM_CPU_ISA: scalar|avx2|avx512|amx; empty = the best this CPU runs
    int simulatedNumaNodes = 0;     // TANDEM_NUMA_SIM: split the pool's cores into N pretend NUMA nodes (1..64)
    int avx512PrefetchBytes = 4096; // TANDEM_CPU_PF_AHEAD: gate/up weight prefetch distance; 0 = none
    int downJobsPerThread = 8;      // TANDEM_DOWN_JOBS: decode's down jobs per thread
    int amxSliceKib = 768;          // TANDEM_AMX_SLICE_KIB: activations kept in L2 per cache block
    int amxAccKib = 256;            // TANDEM_AMX_ACC_KIB: sums kept in L2 between cache blocks
    int amxCacheBlocksMax = 0;      // TANDEM_AMX_KC: K blocks per cache block at most; 0 = the slice decides
    int amxPrefetchBlocks = 2;      // TANDEM_AMX_PREFETCH: B tiles asked for this many K blocks ahead; 0 = none
    int amxInt4Lag = 1;             // TANDEM_AMX_INT4_LAG: INT4 group sums this many groups behind (0..3)
    bool amxStream = true;          // TANDEM_AMX_STREAM: INT4 panels asked for in L2 ahead of unpacking
    bool cpuAttentionKernels = true; // TANDEM_CPU_ATTENTION=0: the CPU's attention on its plain loops (model/attention_*.cpp)
    // GPU path
    bool gpuSplitPrecision = true;  // TANDEM_GPU_PRECISION=bf16 turns off split (hi + lo) GEMM inputs
    bool gpuFp8 = true;             // TANDEM_GPU_FP8=0: FP8 weights rounded to bf16 on the GPU (see ARCHITECTURE)
    bool gpuChain = true;           // TANDEM_GPU_CHAIN=0: no programmatic dependent launches
    int gpuPrefetchMb = -1;         // TANDEM_GPU_PREFETCH_MB: next layer's weights into L2; -1 = half of L2
    // TANDEM_GPU_SPLIT_ATTENTION_UNTIL: a prompt chunk whose context reaches past this many positions computes
    // its attention's P·V (GQA and MLA flash kernels) in one fp16 term instead of split's three; Q·K stays
    // split. Long prompts are attention-bound (issue 28). Off (1 << 30) until this form has passed the
    // long-context check on the GPU: all-bf16 products (its first form) were 1.5-2.2x faster at 16-64K but
    // moved tiny-gpt-oss's rows past tolerance, and so did P·V in one bf16 term (its second form, 2026-12-04);
    // the fp16 term (three more mantissa bits, the same rate) has not run yet (docs/BENCHMARKS.md).
    int gpuSplitAttentionUntil = 1 << 30;
    bool gpuFlashPrefill = true;    // TANDEM_GPU_FLASH=0: prompts' attention (GQA, MLA) and MLA's decode on the scalar kernels (attention.cu)
    bool gpuProfile = false;        // TANDEM_GPU_PROFILE=1: per-stage GPU times of decode steps, printed at exit
    // Prefill chunks of at least this many tokens copy the routed experts of the layers the CPU holds to
    // the GPU from pinned memory and compute them there (ARCHITECTURE, "Placement"); 0 = never.
    int gpuStreamMinTokens = 256;   // TANDEM_GPU_STREAM_MIN_TOKENS
    // Percent of a streamed layer's experts the CPU computes while the rest are copied; -1 = the cost
    // model measured at load (runtime/placement.h, streamCpuExperts).
    int gpuStreamCpuPercent = -1;   // TANDEM_GPU_STREAM_CPU
    // Streamed layers copy only the experts a chunk's tokens chose (1), the whole layer ahead (0), or
    // whichever measured faster (-1; runtime::StreamCopyChoice).
    int gpuStreamRouted = -1;       // TANDEM_GPU_STREAM_ROUTED
    bool gpuStreamLog = false;      // TANDEM_GPU_STREAM_LOG=1: a line on stderr per streamed chunk
    // bf16 terms of each activation in the GPU's prefill expert kernels: 0 = by the experts' type (1,
    // plain bf16, for int8 and int4 experts, whose CPU kernels round activations to 8 bits; 2, hi + lo,
    // for bf16 experts), or 1-3 (bf16 experts keep at least 2).
    int gpuExpertSplits = 0;        // TANDEM_GPU_EXPERT_SPLITS
    // Prompt tokens per GPU prefill chunk; 0 = chosen at load (2048 where the activations fit easily, else
    // down to 512; runtime/gpu/gpu_backend.cpp).
    int gpuPrefillChunk = 0;        // TANDEM_GPU_CHUNK
    // Issue 29's pipeline on one GPU: the layers split into this many stages, each a runner of its own
    // (own stream, buffers, KV cache of its layers, decode graph) handing the residual rows to the next,
    // as GPUs of a machine would; 1 = one runner for every layer. For checks against the one-stage path.
    int gpuStages = 1;              // TANDEM_GPU_STAGES
    // The GPUs to run on when EngineOptions::gpuDevices names none (TANDEM_GPU_DEVICES=1, or 0,1 for issue
    // 29's pipeline over several GPUs, each running a stage of the layers and the routed experts of them
    // its memory holds); empty = GPU 0 alone. The pipeline has not yet run on a machine with two GPUs.
    std::vector<int> gpuDevices;    // TANDEM_GPU_DEVICES

    // From the environment; throws tandem::Error naming the variable for a value out of its range.
    static Tuning fromEnvironment();
    // "TANDEM_AMX_KC=16 TANDEM_GPU_CHAIN=0": the variables whose values differ from the defaults;
    // empty when none do.
    std::string differences() const;
};

// The process's settings, read from the environment on the first call.
const Tuning& tuning();

}  // namespace tandem
