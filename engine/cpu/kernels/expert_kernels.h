#pragma once
// The contract between the MoE layer and the per-instruction-set expert kernels. A kernel computes a
// range of 16-row panels of one expert for a few activation rows (the tokens routed to that expert),
// straight from the packed layout (io/expert_layout.h):
//   gate/up: act[r][16p + i] = SiLU(gate_row . x[r]) * (up_row . x[r])          (float32)
//            or, with an epilogue (GateUpEpilogue), biases added to both products and another
//            gated activation (gpt-oss's clamped SwiGLU)
//   down:    dest[r][n]     += weight[r] * (down_row_n . act[r]) over a range of K chunks
//            (down's bias, weight[r] * bias[n], the MoE layer adds: moe/moe_layer.cpp)
// Each level (scalar, AVX2, AVX-512, AMX) provides the same functions; kernel_check.h tests them
// against the scalar ones.
#include <cstddef>
#include <cstdint>

#include "cpu/cpu_features.h"
#include "cpu/packed_format.h"

namespace tandem::cpu {

// How a level takes the activations of BF16 experts (activation_quant.h). Levels that widen the bf16
// weights to float32 anyway (scalar, AVX2) read float32 activations. Levels whose dot products take
// bf16 pairs (AVX512-BF16, AMX) read each value split in two, hi = bf16(x) and lo = bf16(x - hi),
// and add both products: x is carried to about 16 significant bits instead of bf16's 8, which keeps
// a MoE output within ~5e-6 of float32 per row (bf16 activations alone cost ~3e-3).
enum class Bf16Activations : std::uint8_t { Float32, Split };

// Activation rows in the expert type's kernel format (activation_quant.h).
struct KernelRows {
    const std::byte* data = nullptr;  // row r at data + r * stride; 64-byte aligned rows
    std::size_t stride = 0;           // bytes
    std::size_t loOffset = 0;         // BF16 split: bytes from a row's hi half to its lo half
    const float* scale = nullptr;     // INT8/INT4/MXFP4: per row
    const std::int32_t* groupSums = nullptr;  // INT8/INT4/MXFP4: row r's 32-column sums at groupSums + r * groupSumStride
    std::size_t groupSumStride = 0;
    int rows = 0;
};

// The gated activation that makes an intermediate value from gate's and up's products g and u.
enum class GatedActivation : std::uint8_t {
    SiluMul,        // SiLU(g) * u = g / (1 + e^-g) * u
    ClampedSwiglu,  // gpt-oss: g' = min(g, limit), u' = clamp(u, -limit, limit), (u' + 1) * g' * sigmoid(alpha * g')
};

// What gate/up does after its dot products when it is not plain SiLU(g) * u (GateUpCall::epilogue):
// g += gateBias[i], u += upBias[i] for intermediate row i, then the activation. The bias arrays hold
// layout.interPad floats (zero past inter; a kernel reads whole panels of 16); either may be null.
struct GateUpEpilogue {
    GatedActivation activation = GatedActivation::SiluMul;
    const float* gateBias = nullptr;
    const float* upBias = nullptr;
    float alpha = 1.702f;  // ClampedSwiglu (gpt-oss's values)
    float limit = 7.0f;    // ClampedSwiglu: the model config's swiglu_limit
};

struct GateUpCall {
    const ExpertLayout* layout = nullptr;
    const std::byte* panels = nullptr;  // the bytes of panel firstPanel
    int firstPanel = 0;
    int panelCount = 0;
    KernelRows x;                       // hiddenPad columns
    float* act = nullptr;               // row r at act + r * actStride; columns 16 * panel
    std::size_t actStride = 0;          // floats
    // Optional: the first panel the caller runs next (another piece of work), whose first bytes the
    // kernel prefetches as it reaches the end of its own (decode).
    const std::byte* nextPanels = nullptr;
    // Optional: biases and another activation; null is SiLU(g) * u with no biases (the code path of
    // every model before gpt-oss, unchanged).
    const GateUpEpilogue* epilogue = nullptr;
};

struct DownCall {
    const ExpertLayout* layout = nullptr;
    const std::byte* chunks = nullptr;  // the bytes of chunk firstChunk
    int firstChunk = 0;
    int chunkCount = 0;
    int firstPanel = 0;                 // output row panels
    int panelCount = 0;
    const float* rowScales = nullptr;   // INT8: the scale of every down row
    KernelRows act;                     // interPad columns; the kernel reads those of its chunks
    float* const* dest = nullptr;       // per row: the hidden-sized output row to accumulate into
    const float* weight = nullptr;      // per row: routing weight
    // Optional: the chunk firstChunk of the expert the caller runs next, so the kernel can prefetch its
    // first pieces while it reads its own last ones (decode); over the same panels, or from
    // nextPanelOffset panels further when the next is another range.
    const std::byte* nextChunks = nullptr;
    int nextPanelOffset = 0;
};

using GateUpKernel = void (*)(const GateUpCall&);
using DownKernel = void (*)(const DownCall&);

struct KernelPair {
    GateUpKernel gateUp = nullptr;
    DownKernel down = nullptr;
};

// One level's kernels for each expert type (indexed by ExpertType). GEMV kernels stream the weights
// once with every row in registers (decode: few tokens per expert); GEMM kernels block rows so weights
// are reused from cache (prefill), with AMX tiles where the CPU has them.
struct ExpertKernels {
    Isa isa = Isa::Scalar;
    Bf16Activations bf16Activations = Bf16Activations::Float32;
    KernelPair gemv[kExpertTypeCount];
    KernelPair gemm[kExpertTypeCount];
    // Rows per expert from which GEMM beats GEMV, measured with `tandem-cli bench-moe --sweep`.
    int gemmMinRows[kExpertTypeCount] = {};

    const KernelPair& pick(ExpertType type, bool useGemm) const {
        return useGemm ? gemm[static_cast<int>(type)] : gemv[static_cast<int>(type)];
    }
};

// Kernels of one level; running those of a level the CPU lacks is an illegal instruction, so callers
// go through kernelsFor.
const ExpertKernels& scalarKernels();
const ExpertKernels& avx2Kernels();
const ExpertKernels& avx512Kernels();
const ExpertKernels& amxKernels();

// Throws tandem::Error, naming what is missing, when this machine cannot run `isa`.
const ExpertKernels& kernelsFor(Isa isa);

// Reads `bytes` once with wide loads and returns a value that depends on all of it: the streaming read
// the benchmark measures memory bandwidth with (SSE2, which every x86-64 CPU has).
std::uint64_t streamRead(const std::byte* data, std::size_t bytes);

}  // namespace tandem::cpu
