// The prompt's attention kernels (engine/cuda/attention_prefill.cu on tensor cores, attention.cu's scalar
// kernel) against a float64 reference on the GPU machine, at real shapes (Qwen3-30B-A3B's 32 query and 4
// key heads of 128, gpt-oss's 64/8 of 64 with a sliding window, the fixtures' 4/2 of 32, plain multi-head),
// chunks that start at 0 and after earlier context, with and without split precision; the outputs
// poisoned with NaN before each run. Sampled rows (the first and last tokens of the chunk and random
// ones, every query head) are compared as relative L2 over the sampled outputs. Prints one line per case
// with both kernels' errors and times, and exits 1 when an error is above its bound.
//
// Then decode (one token through launchAttention with the runner's arguments, GpuRunner::enqueueGqa):
// the key-head kernel against the per-head one (AttentionArgs::perHeadDecode), each with the splits
// decodeAttentionSplits gives it, at contexts of 1 to 65536 positions, groups of 1 to 16 query heads per
// key head, head widths 32 to 256, a sliding window, with and without the kernel preparing the step
// (norm, rotation and the new key and value written into the caches: that cache row is poisoned before
// each run). Every head is compared with the float64 reference; times are per launch with L2 flushed
// before each (a layer's cache is not in L2 in a real step), and GB/s counts the keys and values read once.
// `check-attention --variants` also times other tile and stage choices of the key-head kernel;
// `--prefill` runs the prompt's kernels alone.
//
// Cases marked "sinks" give each query head a gpt-oss sink logit (AttentionArgs::sinks: one more term in
// the softmax, attached to no value), in prefill (flash and scalar) and decode (both kernels, one part
// and split contexts), on sliding and full layers; the float64 reference counts it the same way.
//
// Built and run by CHECKS=1 scripts/device-gpu-check.sh:
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o /tmp/check-attention
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/attention.cu"
#include "cuda/attention_key_head_decode.cu"
#include "cuda/attention_prefill.cu"
#include "cuda/mla_decode.cu"
#include "cuda/mla_prefill.cu"
#include "cuda/rope.cu"

using tandem::cuda::bf16;

namespace {

float fromBf16(bf16 h) { return __bfloat162float(h); }

struct Case {
    const char* name;
    int headDim, heads, kvHeads, tokens, start, window;
    bool split;
    bool sinks = false;  // gpt-oss: a sink logit per query head (AttentionArgs::sinks)
    bool oneTermValues = false;  // a long context's chunk: Q·K split, P·V in one fp16 term
    bool scalar = true;          // also the scalar kernel (too slow for the long cases)
};

template <class T>
T* upload(const std::vector<T>& host) {
    T* device = nullptr;
    cudaMalloc(&device, host.size() * sizeof(T));
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return device;
}

struct Result {
    double error;
    float ms;
};

// Decode cases.

// Reads n float4 (leaving the L2 full of clean lines, as a step's weight reads do; a memset would leave
// dirty lines whose write-back takes bandwidth from the kernel timed next).
__global__ void readAll(const float4* p, std::size_t n, float* sink) {
    float sum = 0.0f;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const float4 v = __ldcs(p + i);
        sum += v.x + v.y + v.z + v.w;
    }
    if (sum == 12345.0f) *sink = sum;
}

// The key-head kernel's reads alone: each block streams its part of one key head's key and value rows
// through shared memory as that kernel does (cp.async, tiles of T, Stages in flight), computing
// nothing: what its memory pattern allows.
template <int D, int T, int Stages>
__global__ void __launch_bounds__(256, 1) streamRows(const float* keys, const float* values, int ld, int context, int parts) {
    extern __shared__ float4 streamShared[];
    float* tiles = reinterpret_cast<float*>(streamShared);
    constexpr int C4 = D / 4, S = 256 / C4;
    const int perPart = (context + parts - 1) / parts, first = blockIdx.z * perPart;
    const int last = min(context - 1, first + perPart - 1);
    const int tileCount = last >= first ? (last - first + T) / T : 0;
    const long offset = static_cast<long>(blockIdx.x) * D + 4 * (threadIdx.x % C4);
    auto copyTile = [&](int t) {
        float* stage = tiles + (t % Stages) * 2 * T * D + 4 * (threadIdx.x % C4);
        for (int row = threadIdx.x / C4; row < T; row += S) {
            const bool valid = first + t * T + row <= last;
            const long j = valid ? first + t * T + row : first;
            tandem::cuda::copyAsync16(stage + row * D, keys + j * ld + offset, valid);
            tandem::cuda::copyAsync16(stage + (T + row) * D, values + j * ld + offset, valid);
        }
    };
    int issued = 0;
    for (; issued < Stages - 1; ++issued) {
        if (issued < tileCount) copyTile(issued);
        tandem::cuda::commitCopies();
    }
    for (int t = 0; t < tileCount; ++t, ++issued) {
        if (issued < tileCount) copyTile(issued);
        tandem::cuda::commitCopies();
        tandem::cuda::waitCopies<Stages - 1>();
        __syncthreads();
    }
}

struct DecodeCase {
    const char* name;
    int headDim, heads, kvHeads, context, window;
    bool split, prepare;
    int ropeDim;  // 0: the head's width
    bool interleaved, norms;
    bool sinks = false;  // gpt-oss: a sink logit per query head (AttentionArgs::sinks)
    bool oneTermValues = false;  // a long context's chunk: Q·K split, P·V in one fp16 term
    bool scalar = true;          // also the scalar kernel (too slow for the long cases)
};

// Fast pseudo-random values of unit variance (the caches reach 2 x 134 MB at 65536 positions).
struct FastRandom {
    std::uint64_t state;
    float next() {
        float sum = 0.0f;
        for (int i = 0; i < 4; ++i) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            sum += static_cast<float>(state >> 40) * (1.0f / 16777216.0f);
        }
        return (sum - 2.0f) * 1.7320508f;  // 4 uniforms: mean 2, variance 1/3
    }
};

struct HostRope {
    std::vector<float> invFreq;
    int dim;
    bool interleaved;
    float factor;
};

// The optional RMSNorm, then the rotation at `position`, of one head in float64 (angles in float32 as
// on the GPU).
void normRotate(double* x, int dim, const float* norm, float eps, const HostRope& rope, int position) {
    if (norm) {
        double squares = 0;
        for (int i = 0; i < dim; ++i) squares += x[i] * x[i];
        const double inv = 1.0 / std::sqrt(squares / dim + eps);
        for (int i = 0; i < dim; ++i) x[i] *= inv * norm[i];
    }
    std::vector<double> y(x, x + dim);
    for (int p = 0; p < rope.dim / 2; ++p) {
        const int a = rope.interleaved ? 2 * p : p, b = rope.interleaved ? 2 * p + 1 : p + rope.dim / 2;
        const float angle = static_cast<float>(position) * rope.invFreq[static_cast<std::size_t>(p)];
        const double c = std::cos(static_cast<double>(angle)) * rope.factor, s = std::sin(static_cast<double>(angle)) * rope.factor;
        y[a] = x[a] * c - x[b] * s;
        y[b] = x[b] * c + x[a] * s;
    }
    std::copy(y.begin(), y.end(), x);
}

struct DecodeResult {
    double error;
    float us;
    int splits;
};

// The 8-bit KV cache's rule (model/kv_cache.cpp, quantizeKvGroup): n values to int8 codes with one scale.
void quantizeGroup(const float* x, int n, std::int8_t* codes, float* scale) {
    float largest = 0.0f;
    for (int i = 0; i < n; ++i) largest = std::max(largest, std::abs(x[i]));
    *scale = largest / 127.0f;
    const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
    for (int i = 0; i < n; ++i) codes[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
}

double relativeL2(const std::vector<double>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double d = std::isfinite(got[i]) ? got[i] - want[i] : 1e30;
        num += d * d;
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

int multiprocessorCount() {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count;
}

// One decode case: the reference, then each kernel (or, with `variants`, the key-head kernel's
// alternatives) run, compared and timed. Returns whether every error is within its bound.
bool runDecodeCase(const DecodeCase& c, bool variants) {
    using namespace tandem::cuda;
    const int hd = c.headDim, position = c.context - 1, group = c.heads / c.kvHeads;
    const int ldq = (c.heads + 2 * c.kvHeads) * hd, ldk = c.kvHeads * hd, ldOut = c.heads * hd;
    FastRandom rng{static_cast<std::uint64_t>(c.context) * 7919u + static_cast<std::uint64_t>(c.heads)};
    std::vector<float> q(static_cast<std::size_t>(ldq)), k(static_cast<std::size_t>(c.context) * ldk), v(k.size());
    for (auto& x : q) x = rng.next();
    for (auto& x : k) x = rng.next() * 1.5f;
    for (auto& x : v) x = rng.next();
    std::vector<float> qNorm(static_cast<std::size_t>(hd)), kNorm(qNorm.size());
    for (auto& x : qNorm) x = 1.0f + 0.2f * rng.next();
    for (auto& x : kNorm) x = 1.0f + 0.2f * rng.next();
    // Sinks of the size of the scores and above (one head's sink dominating its softmax).
    std::vector<float> sinks(static_cast<std::size_t>(c.heads));
    for (std::size_t h = 0; h < sinks.size(); ++h) sinks[h] = 2.0f * rng.next() + (h % 5 == 0 ? 6.0f : 1.0f);
    HostRope rope{{}, c.ropeDim ? c.ropeDim : hd, c.interleaved, c.ropeDim ? 1.1f : 1.0f};
    for (int i = 0; i < rope.dim / 2; ++i)
        rope.invFreq.push_back(1.0f / std::pow(1.0e6f, static_cast<float>(2 * i) / static_cast<float>(rope.dim)));
    const float eps = 1e-6f, scale = 1.0f / std::sqrt(static_cast<float>(hd));

    // The reference: with prepare, the query heads and the new key normalized and rotated and the new
    // key and value (the qkv row's) at `position`.
    std::vector<double> reference(static_cast<std::size_t>(ldOut));
    {
        std::vector<double> newKey(static_cast<std::size_t>(ldk)), newValue(newKey.size());
        for (int i = 0; i < ldk; ++i) {
            newKey[i] = c.prepare ? q[static_cast<std::size_t>(c.heads) * hd + i] : k[static_cast<std::size_t>(position) * ldk + i];
            newValue[i] = c.prepare ? q[static_cast<std::size_t>(c.heads + c.kvHeads) * hd + i] : v[static_cast<std::size_t>(position) * ldk + i];
        }
        if (c.prepare)
            for (int g = 0; g < c.kvHeads; ++g)
                normRotate(newKey.data() + g * hd, hd, c.norms ? kNorm.data() : nullptr, eps, rope, position);
        const int first = c.window > 0 ? std::max(0, position - c.window + 1) : 0;
        std::vector<double> qh(static_cast<std::size_t>(hd)), p;
        for (int h = 0; h < c.heads; ++h) {
            const int g = h / group;
            for (int d = 0; d < hd; ++d) qh[d] = q[static_cast<std::size_t>(h) * hd + d];
            if (c.prepare) normRotate(qh.data(), hd, c.norms ? qNorm.data() : nullptr, eps, rope, position);
            p.clear();
            double m = -1e300;
            for (int j = first; j <= position; ++j) {
                double sum = 0;
                for (int d = 0; d < hd; ++d)
                    sum += qh[d] * (j == position ? newKey[g * hd + d] : k[static_cast<std::size_t>(j) * ldk + g * hd + d]);
                p.push_back(sum * scale);
                m = std::max(m, p.back());
            }
            if (c.sinks) m = std::max(m, static_cast<double>(sinks[static_cast<std::size_t>(h)]));
            double l = c.sinks ? std::exp(sinks[static_cast<std::size_t>(h)] - m) : 0.0;  // the sink: no value
            for (double& x : p) l += (x = std::exp(x - m));
            for (int d = 0; d < hd; ++d) {
                double o = 0;
                for (int j = first; j <= position; ++j)
                    o += p[static_cast<std::size_t>(j - first)] *
                         (j == position ? newValue[g * hd + d] : v[static_cast<std::size_t>(j) * ldk + g * hd + d]);
                reference[static_cast<std::size_t>(h) * hd + d] = o / l;
            }
        }
    }

    float* dq = upload(q);
    float* dk = upload(k);
    float* dv = upload(v);
    float* dqNorm = upload(qNorm);
    float* dkNorm = upload(kNorm);
    float* dInvFreq = upload(rope.invFreq);
    float* dSinks = upload(sinks);
    int* dStart = upload(std::vector<int>{position});
    bf16* dOut = nullptr;
    const std::size_t outCount = 2 * static_cast<std::size_t>(ldOut);
    cudaMalloc(&dOut, outCount * sizeof(bf16));
    float* dPartials = nullptr;
    cudaMalloc(&dPartials, static_cast<std::size_t>(c.heads) * 64 * (hd + 2) * sizeof(float));
    unsigned* dDone = nullptr;
    cudaMalloc(&dDone, static_cast<std::size_t>(c.heads) * sizeof(unsigned));
    cudaMemset(dDone, 0, static_cast<std::size_t>(c.heads) * sizeof(unsigned));
    // Written between timed launches so that the caches are read from memory, as in a step.
    static float4* flush = nullptr;
    static float* sink = nullptr;
    constexpr std::size_t kFlushBytes = 256u << 20;
    if (!flush) {
        cudaMalloc(&flush, kFlushBytes);
        cudaMemset(flush, 0, kFlushBytes);
        cudaMalloc(&sink, sizeof(float));
    }

    // As GpuRunner::enqueueGqa fills them for a decode step.
    AttentionArgs a{};
    a.qA = dq;
    a.ldqA = ldq;
    a.qAHeadStride = hd;
    a.dimA = hd;
    a.keyA = dk;
    a.ldKeyA = ldk;
    a.value = dv;
    a.ldValue = ldk;
    a.dimV = hd;
    a.keyHeadStride = hd;
    a.group = group;
    a.heads = c.heads;
    a.tokens = 1;
    a.start = dStart;
    a.window = c.window;
    a.scale = scale;
    a.sinks = c.sinks ? dSinks : nullptr;
    a.out = dOut;
    a.ldOut = ldOut;
    a.outHeadStride = hd;
    a.split = c.split;
    a.decodeKernel = true;
    a.partials = dPartials;
    a.partsDone = dDone;
    a.prepare = c.prepare;
    if (c.prepare) {
        a.qNorm = c.norms ? dqNorm : nullptr;
        a.kNorm = c.norms ? dkNorm : nullptr;
        a.eps = eps;
        a.rope = RopeParams{dInvFreq, rope.dim, rope.interleaved, rope.factor};
        a.kNew = dq + static_cast<std::size_t>(c.heads) * hd;
        a.vNew = a.kNew + ldk;
        a.keyCache = dk;
        a.valueCache = dv;
    }
    const int multiprocessors = multiprocessorCount();

    // Runs `launch` once on poisoned outputs (and, with prepare, a poisoned cache row at `position`),
    // compares every head (the outputs kept in lastOut), then times it.
    std::vector<double> lastOut(static_cast<std::size_t>(ldOut));
    auto run = [&](auto launch, int splits) {
        a.splits = splits;
        const float nan = std::nanf("");
        std::vector<bf16> poison(outCount, __float2bfloat16(nan));
        cudaMemcpy(dOut, poison.data(), outCount * sizeof(bf16), cudaMemcpyHostToDevice);
        if (c.prepare) {
            const std::vector<float> row(static_cast<std::size_t>(ldk), nan);
            cudaMemcpy(dk + static_cast<std::size_t>(position) * ldk, row.data(), ldk * sizeof(float), cudaMemcpyHostToDevice);
            cudaMemcpy(dv + static_cast<std::size_t>(position) * ldk, row.data(), ldk * sizeof(float), cudaMemcpyHostToDevice);
        }
        launch(a);
        cudaDeviceSynchronize();
        std::vector<bf16> out(outCount);
        cudaMemcpy(out.data(), dOut, outCount * sizeof(bf16), cudaMemcpyDeviceToHost);
        double num = 0, den = 0;
        for (int i = 0; i < ldOut; ++i) {
            double got = fromBf16(out[static_cast<std::size_t>(i)]);
            if (c.split) got += fromBf16(out[static_cast<std::size_t>(ldOut + i)]);
            lastOut[static_cast<std::size_t>(i)] = got;
            const double diff = std::isfinite(got) ? got - reference[static_cast<std::size_t>(i)] : 1e30;
            num += diff * diff;
            den += reference[static_cast<std::size_t>(i)] * reference[static_cast<std::size_t>(i)];
        }
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        constexpr int kReps = 10;
        float total = 0;
        for (int r = 0; r < kReps; ++r) {
            readAll<<<1024, 256>>>(flush, kFlushBytes / sizeof(float4), sink);
            cudaEventRecord(e0);
            launch(a);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            total += ms;
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return DecodeResult{std::sqrt(num / den), 1000.0f * total / kReps, splits};
    };
    const auto viaLaunchAttention = [](const AttentionArgs& x) { launchAttention(x, nullptr); };

    const int first = c.window > 0 ? std::max(0, position - c.window + 1) : 0;
    const double bytes = 2.0 * (position - first + 1) * ldk * sizeof(float);
    // Split: float32-like; bf16 outputs: their rounding.
    const double bound = c.split ? 1e-4 : 2e-2;
    bool ok = true;
    auto report = [&](const char* kernel, const DecodeResult& r, const DecodeResult* base) {
        const cudaError_t e = cudaGetLastError();
        const bool good = e == cudaSuccess && r.error <= bound;
        ok = ok && good;
        std::printf("  %-30s splits %2d  error %9.3g  %9.2f us  %7.0f GB/s", kernel, r.splits, r.error, r.us,
                    bytes / (r.us * 1e-6) / 1e9);
        if (base) std::printf("  %5.2fx", base->us / r.us);
        std::printf("%s%s\n", good ? "" : "  FAILED", e == cudaSuccess ? "" : cudaGetErrorString(e));
    };

    std::printf("%s (%d/%d heads of %d, %d positions%s%s%s%s)\n", c.name, c.heads, c.kvHeads, hd, c.context,
                c.window ? ", window" : "", c.prepare ? ", prepare" : "", c.split ? "" : ", bf16", c.sinks ? ", sinks" : "");
    a.perHeadDecode = true;
    const DecodeResult perHead = run(viaLaunchAttention, decodeAttentionSplits(a, multiprocessors));
    report("per query head", perHead, nullptr);
    a.perHeadDecode = false;
    const DecodeResult byKey = run(viaLaunchAttention, decodeAttentionSplits(a, multiprocessors));
    report(groupDecodeServes(a) ? "per key head" : "per key head (not served)", byKey, &perHead);

    // The 8-bit cache (AttentionArgs::int8Cache) as GpuRunner::enqueueGqa runs it: the cache quantized by
    // the CPU's rule, the step's query and key prepared and its key and value quantized by
    // launchGqaPrepare, then (every width) the float32 rows launchDequantizeRows gives for the kernels
    // that read float32, and (heads of 128 or 64) the key-head kernel reading the codes. Its error against the
    // float64 reference of the float32 cache is the quantization's (bounded loosely); the codes' kernel
    // against the rows' must agree as two float32 kernels do.
    {
        const std::size_t rows = static_cast<std::size_t>(c.context) * ldk;
        std::vector<std::int8_t> kc(rows), vc(rows);
        std::vector<float> ks(static_cast<std::size_t>(c.context) * c.kvHeads), vs(ks.size());
        for (std::size_t g = 0; g < ks.size(); ++g) {
            quantizeGroup(k.data() + g * hd, hd, kc.data() + g * hd, &ks[g]);
            quantizeGroup(v.data() + g * hd, hd, vc.data() + g * hd, &vs[g]);
        }
        std::int8_t* dkc = upload(kc);
        std::int8_t* dvc = upload(vc);
        float* dks = upload(ks);
        float* dvs = upload(vs);
        float* dq8 = upload(q);
        float *dkf = nullptr, *dvf = nullptr;
        cudaMalloc(&dkf, rows * sizeof(float));
        cudaMalloc(&dvf, rows * sizeof(float));
        const Int8Rows kr{dkc, dks, ldk, hd}, vr{dvc, dvs, ldk, hd};
        bool writesGood = true;
        if (c.prepare) {
            launchGqaPrepare(dq8, 1, c.heads, c.kvHeads, hd, a.qNorm, a.kNorm, eps, a.rope, dStart, nullptr, nullptr, nullptr, kr, vr);
            // Its writes at `position`, every key and value head, against float64: within half a step of the
            // head's scale, the scale its largest magnitude / 127.
            std::vector<std::int8_t> gotK(static_cast<std::size_t>(ldk)), gotV(gotK.size());
            std::vector<float> gotKs(static_cast<std::size_t>(c.kvHeads)), gotVs(gotKs.size());
            cudaMemcpy(gotK.data(), dkc + static_cast<std::size_t>(position) * ldk, ldk, cudaMemcpyDeviceToHost);
            cudaMemcpy(gotV.data(), dvc + static_cast<std::size_t>(position) * ldk, ldk, cudaMemcpyDeviceToHost);
            cudaMemcpy(gotKs.data(), dks + static_cast<std::size_t>(position) * c.kvHeads, c.kvHeads * sizeof(float), cudaMemcpyDeviceToHost);
            cudaMemcpy(gotVs.data(), dvs + static_cast<std::size_t>(position) * c.kvHeads, c.kvHeads * sizeof(float), cudaMemcpyDeviceToHost);
            std::vector<double> want(static_cast<std::size_t>(hd));
            const auto within = [&](const std::int8_t* codes, float scale) {
                double largest = 0, worst = 0;
                for (double x : want) largest = std::max(largest, std::abs(x));
                for (int d = 0; d < hd; ++d) worst = std::max(worst, std::abs(codes[d] * static_cast<double>(scale) - want[d]));
                return std::abs(scale - largest / 127.0) <= 1e-4 * largest / 127.0 + 1e-30 && worst <= 0.5001 * scale + 1e-30;
            };
            for (int g = 0; g < c.kvHeads; ++g) {
                for (int d = 0; d < hd; ++d) want[d] = q[static_cast<std::size_t>(c.heads + g) * hd + d];
                normRotate(want.data(), hd, c.norms ? kNorm.data() : nullptr, eps, rope, position);
                writesGood = writesGood && within(gotK.data() + g * hd, gotKs[static_cast<std::size_t>(g)]);
                for (int d = 0; d < hd; ++d) want[d] = q[static_cast<std::size_t>(c.heads + c.kvHeads + g) * hd + d];
                writesGood = writesGood && within(gotV.data() + g * hd, gotVs[static_cast<std::size_t>(g)]);
            }
            ok = ok && writesGood;
            std::printf("  %-30s %s\n", "int8 writes (launchGqaPrepare)", writesGood ? "within half a step" : "FAILED");
        }
        launchDequantizeRows(kr, 0, dStart, 1, c.context, dkf, ldk, nullptr);
        launchDequantizeRows(vr, 0, dStart, 1, c.context, dvf, ldk, nullptr);
        const AttentionArgs kept = a;
        a.qA = dq8;
        a.prepare = false;
        a.keyA = dkf;
        a.value = dvf;
        const DecodeResult onRows = run(viaLaunchAttention, decodeAttentionSplits(a, multiprocessors));
        const std::vector<double> rowsOut = lastOut;
        const cudaError_t e0 = cudaGetLastError();
        const bool rowsGood = e0 == cudaSuccess && onRows.error <= 0.05;
        ok = ok && rowsGood;
        std::printf("  %-30s splits %2d  error %9.3g  %9.2f us (the quantization's error)%s%s\n", "int8 cache, float32 rows",
                    onRows.splits, onRows.error, onRows.us, rowsGood ? "" : "  FAILED", e0 == cudaSuccess ? "" : cudaGetErrorString(e0));
        a.int8Cache = true;
        a.keyInt8 = kr;
        a.valueInt8 = vr;
        a.keyA = a.value = nullptr;
        if (keyHeadDecodeServes(a)) {
            const DecodeResult codes = run(viaLaunchAttention, decodeAttentionSplits(a, multiprocessors));
            const double apart = relativeL2(lastOut, rowsOut);
            const cudaError_t e1 = cudaGetLastError();
            const bool good = e1 == cudaSuccess && apart <= (c.split ? 1e-5 : 1e-2) && codes.error <= 0.05;
            ok = ok && good;
            const double int8Bytes = 2.0 * (position - first + 1) * c.kvHeads * (hd + 4);
            std::printf("  %-30s splits %2d  error %9.3g  %9.2f us  %7.0f GB/s  %5.2fx  from the rows' %9.3g%s%s\n",
                        "int8 cache, codes by key head", codes.splits, codes.error, codes.us, int8Bytes / (codes.us * 1e-6) / 1e9,
                        byKey.us / codes.us, apart, good ? "" : "  FAILED", e1 == cudaSuccess ? "" : cudaGetErrorString(e1));
        }
        a = kept;
        for (void* p : {static_cast<void*>(dkc), static_cast<void*>(dvc), static_cast<void*>(dks), static_cast<void*>(dvs),
                        static_cast<void*>(dq8), static_cast<void*>(dkf), static_cast<void*>(dvf)})
            cudaFree(p);
    }

    if (variants && hd == 128 && c.context >= 4096 && !c.window) {
        // The same reads alone (a tile's keys and values through shared memory, nothing computed).
        auto stream = [&](const char* name, auto kernel, int stages, int tile) {
            const int splits = decodeAttentionSplits(a, multiprocessors);
            const std::size_t shared = static_cast<std::size_t>(stages) * 2 * tile * hd * sizeof(float);
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
            const auto launch = [&](const AttentionArgs&) {
                kernel<<<dim3(c.kvHeads, 1, splits), 256, shared>>>(dk, dv, ldk, c.context, splits);
            };
            DecodeResult r = run(launch, splits);
            r.error = 0;  // nothing computed
            report(name, r, &perHead);
        };
        stream("  reads alone, tile 64 x 3", streamRows<128, 64, 3>, 3, 64);
        stream("  reads alone, tile 32 x 4", streamRows<128, 32, 4>, 4, 32);
    }
    if (variants && groupDecodeServes(a)) {
        // Other tiles and stages of the key-head kernel, each with the splits that fill the GPU with it.
        auto variant = [&](const char* name, auto launchIt, auto blocksIt) {
            const int splits = std::clamp(std::max(1, blocksIt()) * multiprocessors / c.kvHeads, 2, 64);
            report(name, run([&](const AttentionArgs& x) { launchIt(x, nullptr); }, splits), &perHead);
        };
#define TANDEM_VARIANT(GM, KD, T, ST, MB)                                                                 \
    variant("  tile " #T ", " #ST " stages, " #MB " a SM", launchGroupDecode<GM, KD, T, ST, MB>,            \
            groupDecodeBlocksPerMultiprocessor<GM, KD, T, ST, MB>)
        if (hd == 128 && group <= 8 && group > 4) {
            TANDEM_VARIANT(8, 4, 64, 3, 1);
            TANDEM_VARIANT(8, 4, 32, 3, 1);
            TANDEM_VARIANT(8, 4, 32, 2, 2);
        } else if (hd == 128 && group > 8) {
            TANDEM_VARIANT(16, 4, 32, 3, 1);
            TANDEM_VARIANT(16, 4, 32, 2, 2);
        } else if (hd == 128 && group > 2 && group <= 4) {
            TANDEM_VARIANT(4, 4, 64, 2, 2);
        } else if (hd == 64 && group > 4 && group <= 8) {
            TANDEM_VARIANT(8, 2, 64, 2, 2);
        }
#undef TANDEM_VARIANT
    }

    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dqNorm);
    cudaFree(dkNorm);
    cudaFree(dInvFreq);
    cudaFree(dSinks);
    cudaFree(dStart);
    cudaFree(dOut);
    cudaFree(dPartials);
    cudaFree(dDone);
    return ok;
}

// MLA prefill (mla_prefill.cu): the non-absorbed form as GpuRunner::enqueueMlaFlash runs it, q [tokens][heads]
// [nope | rope], the decompressed k_nope and v [positions][heads][nope + v], the rope keys [positions][rope]
// shared by the heads, the context in passes of passRows positions (0: one pass) with the running softmax
// in between. Sampled rows of every head against float64; the time of all passes, and TFLOP/s over the
// causal pairs' 2 x (nope + rope + v) FLOPs a head. Also timed: the absorbed form on the scalar kernel,
// which TANDEM_GPU_FLASH=0 keeps (latent 512 + rope 64, values 512: its time only, on random inputs).
struct MlaCase {
    const char* name;
    int heads, nope, rope, vDim, tokens, start;
    bool split;
    int passRows;
    int latent;  // the absorbed form's width for its timing; 0: not timed
    bool oneTermValues = false;  // a long context's chunk: Q·K split, P·V in one fp16 term
};

bool runMlaPrefillCase(const MlaCase& c) {
    using namespace tandem::cuda;
    const int context = c.start + c.tokens, qHead = c.nope + c.rope, kvHead = c.nope + c.vDim;
    const int ldq = c.heads * qHead, ldkv = c.heads * kvHead, ldOut = c.heads * c.vDim;
    FastRandom rng{static_cast<std::uint64_t>(context) * 31u + static_cast<std::uint64_t>(c.heads) * 7u + c.nope};
    std::vector<float> q(static_cast<std::size_t>(c.tokens) * ldq), kv(static_cast<std::size_t>(context) * ldkv),
        ropeKeys(static_cast<std::size_t>(context) * c.rope);
    for (auto& x : q) x = rng.next();
    for (auto& x : kv) x = rng.next();
    for (auto& x : ropeKeys) x = rng.next() * 1.5f;
    const float scale = 1.0f / std::sqrt(static_cast<float>(qHead));

    std::vector<int> tokens = {0, std::min(1, c.tokens - 1), std::max(0, c.tokens - 2), c.tokens - 1};
    std::mt19937 pick(static_cast<unsigned>(context));
    for (int i = 0; i < 12; ++i) tokens.push_back(static_cast<int>(pick() % static_cast<unsigned>(c.tokens)));
    std::vector<double> reference;
    std::vector<double> p(static_cast<std::size_t>(context));
    for (int t : tokens)
        for (int h = 0; h < c.heads; ++h) {
            const int position = c.start + t;
            const float* qh = q.data() + static_cast<std::size_t>(t) * ldq + static_cast<std::size_t>(h) * qHead;
            double m = -1e300;
            for (int j = 0; j <= position; ++j) {
                const float* k = kv.data() + static_cast<std::size_t>(j) * ldkv + static_cast<std::size_t>(h) * kvHead;
                const float* kr = ropeKeys.data() + static_cast<std::size_t>(j) * c.rope;
                double sum = 0;
                for (int d = 0; d < c.nope; ++d) sum += static_cast<double>(qh[d]) * k[d];
                for (int d = 0; d < c.rope; ++d) sum += static_cast<double>(qh[c.nope + d]) * kr[d];
                p[static_cast<std::size_t>(j)] = sum * scale;
                m = std::max(m, p[static_cast<std::size_t>(j)]);
            }
            double l = 0;
            for (int j = 0; j <= position; ++j) l += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m));
            std::vector<double> o(static_cast<std::size_t>(c.vDim), 0.0);
            for (int j = 0; j <= position; ++j) {
                const float* v = kv.data() + static_cast<std::size_t>(j) * ldkv + static_cast<std::size_t>(h) * kvHead + c.nope;
                for (int d = 0; d < c.vDim; ++d) o[static_cast<std::size_t>(d)] += p[static_cast<std::size_t>(j)] * v[d];
            }
            for (int d = 0; d < c.vDim; ++d) reference.push_back(o[static_cast<std::size_t>(d)] / l);
        }

    float* dq = upload(q);
    float* dkv = upload(kv);
    float* dRope = upload(ropeKeys);
    bf16* dOut = nullptr;
    const std::size_t outCount = 2 * static_cast<std::size_t>(c.tokens) * ldOut;
    cudaMalloc(&dOut, outCount * sizeof(bf16));
    float* dState = nullptr;
    cudaMalloc(&dState, static_cast<std::size_t>(c.tokens) * c.heads * (c.vDim + 2) * sizeof(float));

    MlaPrefillArgs a{};
    a.q = dq;
    a.ldq = ldq;
    a.qHeadStride = qHead;
    a.ldkv = ldkv;
    a.kvHeadStride = kvHead;
    a.ropeKeys = dRope;
    a.ldRope = c.rope;
    a.nope = c.nope;
    a.rope = c.rope;
    a.vDim = c.vDim;
    a.heads = c.heads;
    a.tokens = c.tokens;
    a.start = c.start;
    a.state = dState;
    a.scale = scale;
    a.out = dOut;
    a.ldOut = ldOut;
    a.outHeadStride = c.vDim;
    a.split = c.split;
    a.oneTermValues = c.oneTermValues;
    const int passRows = c.passRows > 0 ? c.passRows : context;
    // The passes as enqueueMlaFlash runs them (each pass's keys and values at the start of its buffer).
    auto launchAll = [&]() {
        for (int p0 = 0; p0 < context; p0 += passRows) {
            a.kv = dkv + static_cast<std::size_t>(p0) * ldkv;
            a.kvFirst = p0;
            a.kvCount = std::min(passRows, context - p0);
            a.firstPass = p0 == 0;
            a.lastPass = p0 + a.kvCount >= context;
            launchMlaFlashPrefill(a, nullptr);
        }
    };
    std::vector<bf16> poison(outCount, __float2bfloat16(std::nanf("")));
    cudaMemcpy(dOut, poison.data(), outCount * sizeof(bf16), cudaMemcpyHostToDevice);
    launchAll();
    cudaDeviceSynchronize();
    std::vector<bf16> out(outCount);
    cudaMemcpy(out.data(), dOut, outCount * sizeof(bf16), cudaMemcpyDeviceToHost);
    double num = 0, den = 0;
    std::size_t i = 0;
    for (int t : tokens)
        for (int h = 0; h < c.heads; ++h)
            for (int d = 0; d < c.vDim; ++d, ++i) {
                const std::size_t at = static_cast<std::size_t>(t) * ldOut + static_cast<std::size_t>(h) * c.vDim + d;
                double got = fromBf16(out[at]);
                if (c.split) got += fromBf16(out[at + static_cast<std::size_t>(c.tokens) * ldOut]);
                const double diff = std::isfinite(got) ? got - reference[i] : 1e30;
                num += diff * diff;
                den += reference[i] * reference[i];
            }
    const double error = std::sqrt(num / den);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    constexpr int kReps = 3;
    cudaEventRecord(e0);
    for (int r = 0; r < kReps; ++r) launchAll();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= kReps;
    const cudaError_t e = cudaGetLastError();

    // The absorbed form on the scalar kernel, as enqueueMla runs it without the flash path: its time.
    float absorbedMs = 0;
    if (c.latent > 0) {
        const int L = c.latent;
        float *dqLatent = nullptr, *dLatent = nullptr, *dRopeQ = nullptr;
        bf16* dCtx = nullptr;
        cudaMalloc(&dqLatent, static_cast<std::size_t>(c.tokens) * c.heads * L * sizeof(float));
        cudaMalloc(&dLatent, static_cast<std::size_t>(context) * L * sizeof(float));
        cudaMalloc(&dRopeQ, static_cast<std::size_t>(c.tokens) * ldq * sizeof(float));
        cudaMalloc(&dCtx, 2 * static_cast<std::size_t>(c.tokens) * c.heads * L * sizeof(bf16));
        cudaMemset(dqLatent, 0, static_cast<std::size_t>(c.tokens) * c.heads * L * sizeof(float));
        cudaMemset(dLatent, 0, static_cast<std::size_t>(context) * L * sizeof(float));
        cudaMemset(dRopeQ, 0, static_cast<std::size_t>(c.tokens) * ldq * sizeof(float));
        int* dStart = upload(std::vector<int>{c.start});
        AttentionArgs b{};
        b.qA = dqLatent;
        b.ldqA = c.heads * L;
        b.qAHeadStride = L;
        b.dimA = L;
        b.qB = dRopeQ + c.nope;
        b.ldqB = ldq;
        b.qBHeadStride = qHead;
        b.dimB = c.rope;
        b.keyA = dLatent;
        b.ldKeyA = L;
        b.keyB = dRope;
        b.ldKeyB = c.rope;
        b.value = dLatent;
        b.ldValue = L;
        b.dimV = L;
        b.group = 1;
        b.heads = c.heads;
        b.tokens = c.tokens;
        b.start = dStart;
        b.scale = scale;
        b.out = dCtx;
        b.ldOut = c.heads * L;
        b.outHeadStride = L;
        b.split = c.split;
        b.splits = 1;
        b.decodeKernel = true;
        cudaEventRecord(e0);
        launchAttention(b, nullptr);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&absorbedMs, e0, e1);
        cudaFree(dqLatent);
        cudaFree(dLatent);
        cudaFree(dRopeQ);
        cudaFree(dCtx);
        cudaFree(dStart);
    }
    const cudaError_t e2 = cudaGetLastError();

    double pairs = 0;
    for (int t = 0; t < c.tokens; ++t) pairs += c.start + t + 1;
    const double flops = pairs * c.heads * 2.0 * (qHead + c.vDim);
    // Split: float32-like; bf16 products: the GPU path's 2e-2.
    const double bound = c.oneTermValues ? 2e-3 : c.split ? 1e-4 : 2e-2;
    const bool ok = e == cudaSuccess && e2 == cudaSuccess && error <= bound;
    std::printf("%-44s %10.3g %10.3f %8.1f", c.name, error, ms, flops / (ms * 1e-3) / 1e12);
    if (c.latent > 0)
        std::printf(" %12.3f", absorbedMs);
    else
        std::printf(" %12s", "-");
    std::printf("%s%s%s\n", ok ? "" : "  FAILED", e == cudaSuccess ? "" : cudaGetErrorString(e),
                e2 == cudaSuccess ? "" : cudaGetErrorString(e2));
    cudaFree(dq);
    cudaFree(dkv);
    cudaFree(dRope);
    cudaFree(dOut);
    cudaFree(dState);
    return ok;
}

// MLA decode (mla_decode.cu): the absorbed form as GpuRunner::enqueueMla runs it for one token, the
// query heads' latent part [heads][latent] and rope part (inside q rows of nope + rope), the latent cache
// as keys and values and the rope cache, through launchAttention: the tensor-core kernel by groups of 16
// heads against the per-head kernel (perHeadDecode, TANDEM_GPU_FLASH=0), each with the splits
// decodeAttentionSplits gives it. Every head against float64; us a launch with L2 flushed; GB/s counts
// the cache rows read once.
struct MlaDecodeCase {
    const char* name;
    int heads, latent, rope, context;
    bool split;
};

bool runMlaDecodeCase(const MlaDecodeCase& c) {
    using namespace tandem::cuda;
    const int L = c.latent, R = c.rope, position = c.context - 1, nope = 128, qHead = nope + R;
    FastRandom rng{static_cast<std::uint64_t>(c.context) * 131u + static_cast<std::uint64_t>(c.heads) + L};
    std::vector<float> qLatent(static_cast<std::size_t>(c.heads) * L), q(static_cast<std::size_t>(c.heads) * qHead),
        latent(static_cast<std::size_t>(c.context) * L), rope(static_cast<std::size_t>(c.context) * R);
    for (auto& x : qLatent) x = rng.next() * 0.5f;
    for (auto& x : q) x = rng.next();
    for (auto& x : latent) x = rng.next();
    for (auto& x : rope) x = rng.next() * 1.5f;
    const float scale = 1.0f / std::sqrt(static_cast<float>(qHead));
    std::vector<double> reference(static_cast<std::size_t>(c.heads) * L), p(static_cast<std::size_t>(c.context));
    for (int h = 0; h < c.heads; ++h) {
        double m = -1e300;
        for (int j = 0; j <= position; ++j) {
            double sum = 0;
            for (int d = 0; d < L; ++d) sum += static_cast<double>(qLatent[static_cast<std::size_t>(h) * L + d]) * latent[static_cast<std::size_t>(j) * L + d];
            for (int d = 0; d < R; ++d) sum += static_cast<double>(q[static_cast<std::size_t>(h) * qHead + nope + d]) * rope[static_cast<std::size_t>(j) * R + d];
            p[static_cast<std::size_t>(j)] = sum * scale;
            m = std::max(m, p[static_cast<std::size_t>(j)]);
        }
        double l = 0;
        for (int j = 0; j <= position; ++j) l += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m));
        for (int j = 0; j <= position; ++j)
            for (int d = 0; d < L; ++d)
                reference[static_cast<std::size_t>(h) * L + d] += p[static_cast<std::size_t>(j)] * latent[static_cast<std::size_t>(j) * L + d] / l;
    }
    float* dqLatent = upload(qLatent);
    float* dq = upload(q);
    float* dLatent = upload(latent);
    float* dRope = upload(rope);
    int* dStart = upload(std::vector<int>{position});
    const int ldOut = c.heads * L;
    const std::size_t outCount = 2 * static_cast<std::size_t>(ldOut);
    bf16* dOut = nullptr;
    cudaMalloc(&dOut, outCount * sizeof(bf16));
    float* dPartials = nullptr;
    cudaMalloc(&dPartials, static_cast<std::size_t>(c.heads) * kMaxMlaSplits * (L + 2) * sizeof(float));
    unsigned* dDone = nullptr;
    cudaMalloc(&dDone, static_cast<std::size_t>(c.heads) * sizeof(unsigned));
    cudaMemset(dDone, 0, static_cast<std::size_t>(c.heads) * sizeof(unsigned));
    static float4* flush = nullptr;
    static float* sink = nullptr;
    constexpr std::size_t kFlushBytes = 256u << 20;
    if (!flush) {
        cudaMalloc(&flush, kFlushBytes);
        cudaMemset(flush, 0, kFlushBytes);
        cudaMalloc(&sink, sizeof(float));
    }
    AttentionArgs a{};
    a.qA = dqLatent;
    a.ldqA = c.heads * L;
    a.qAHeadStride = L;
    a.dimA = L;
    a.qB = dq + nope;
    a.ldqB = c.heads * qHead;
    a.qBHeadStride = qHead;
    a.dimB = R;
    a.keyA = dLatent;
    a.ldKeyA = L;
    a.keyB = dRope;
    a.ldKeyB = R;
    a.value = dLatent;
    a.ldValue = L;
    a.dimV = L;
    a.group = 1;
    a.heads = c.heads;
    a.tokens = 1;
    a.start = dStart;
    a.scale = scale;
    a.out = dOut;
    a.ldOut = ldOut;
    a.outHeadStride = L;
    a.split = c.split;
    a.decodeKernel = true;
    a.partials = dPartials;
    a.partsDone = dDone;
    const int multiprocessors = multiprocessorCount();
    std::vector<double> lastOut(static_cast<std::size_t>(ldOut));
    auto run = [&]() {
        a.splits = decodeAttentionSplits(a, multiprocessors);
        std::vector<bf16> poison(outCount, __float2bfloat16(std::nanf("")));
        cudaMemcpy(dOut, poison.data(), outCount * sizeof(bf16), cudaMemcpyHostToDevice);
        launchAttention(a, nullptr);
        cudaDeviceSynchronize();
        std::vector<bf16> out(outCount);
        cudaMemcpy(out.data(), dOut, outCount * sizeof(bf16), cudaMemcpyDeviceToHost);
        double num = 0, den = 0;
        for (int i = 0; i < ldOut; ++i) {
            double got = fromBf16(out[static_cast<std::size_t>(i)]);
            if (c.split) got += fromBf16(out[static_cast<std::size_t>(ldOut + i)]);
            lastOut[static_cast<std::size_t>(i)] = got;
            const double diff = std::isfinite(got) ? got - reference[static_cast<std::size_t>(i)] : 1e30;
            num += diff * diff;
            den += reference[static_cast<std::size_t>(i)] * reference[static_cast<std::size_t>(i)];
        }
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        constexpr int kReps = 10;
        float total = 0;
        for (int r = 0; r < kReps; ++r) {
            readAll<<<1024, 256>>>(flush, kFlushBytes / sizeof(float4), sink);
            cudaEventRecord(e0);
            launchAttention(a, nullptr);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            total += ms;
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return DecodeResult{std::sqrt(num / den), 1000.0f * total / kReps, a.splits};
    };
    const double bytes = static_cast<double>(c.context) * (L + R) * sizeof(float);
    const double bound = c.split ? 1e-4 : 2e-2;
    bool ok = true;
    auto report = [&](const char* kernel, const DecodeResult& r, const DecodeResult* base) {
        const cudaError_t e = cudaGetLastError();
        const bool good = e == cudaSuccess && r.error <= bound;
        ok = ok && good;
        std::printf("  %-30s splits %2d  error %9.3g  %9.2f us  %7.0f GB/s", kernel, r.splits, r.error, r.us,
                    bytes / (r.us * 1e-6) / 1e9);
        if (base) std::printf("  %5.2fx", base->us / r.us);
        std::printf("%s%s\n", good ? "" : "  FAILED", e == cudaSuccess ? "" : cudaGetErrorString(e));
    };
    std::printf("%s (%d heads, latent %d + rope %d, %d positions%s)\n", c.name, c.heads, L, R, c.context, c.split ? "" : ", bf16");
    a.perHeadDecode = true;
    const DecodeResult perHead = run();
    report("per query head", perHead, nullptr);
    a.perHeadDecode = false;
    const DecodeResult tensor = run();
    report(mlaDecodeServes(a) ? "tensor cores, 16 heads a block" : "tensor cores (not served)", tensor, &perHead);

    // The 8-bit cache (AttentionArgs::int8Cache), as GpuRunner::enqueueMla runs it: the latent and rope rows
    // quantized by the CPU's rule (a scale a row each); the tensor-core kernel on the float32 rows they give
    // (what launchDequantizeRows hands the other kernels) against the same kernel reading the codes: they
    // must agree as two float32 kernels do; either's error against float64 is the quantization's.
    {
        std::vector<std::int8_t> lc(latent.size()), rc(rope.size());
        std::vector<float> ls(static_cast<std::size_t>(c.context)), rs(ls.size()), lf(latent.size()), rf(rope.size());
        for (int j = 0; j < c.context; ++j) {
            const std::size_t lo = static_cast<std::size_t>(j) * L, ro = static_cast<std::size_t>(j) * R;
            quantizeGroup(latent.data() + lo, L, lc.data() + lo, &ls[static_cast<std::size_t>(j)]);
            quantizeGroup(rope.data() + ro, R, rc.data() + ro, &rs[static_cast<std::size_t>(j)]);
            for (int d = 0; d < L; ++d) lf[lo + d] = static_cast<float>(lc[lo + d]) * ls[static_cast<std::size_t>(j)];
            for (int d = 0; d < R; ++d) rf[ro + d] = static_cast<float>(rc[ro + d]) * rs[static_cast<std::size_t>(j)];
        }
        std::int8_t* dlc = upload(lc);
        std::int8_t* drc = upload(rc);
        float* dls = upload(ls);
        float* drs = upload(rs);
        float* dlf = upload(lf);
        float* drf = upload(rf);
        a.keyA = a.value = dlf;
        a.keyB = drf;
        const DecodeResult rows = run();
        const std::vector<double> rowsOut = lastOut;
        const cudaError_t e0 = cudaGetLastError();
        const bool rowsGood = e0 == cudaSuccess && rows.error <= 0.05;
        ok = ok && rowsGood;
        std::printf("  %-30s splits %2d  error %9.3g  %9.2f us (the quantization's error)%s%s\n", "int8 cache, float32 rows",
                    rows.splits, rows.error, rows.us, rowsGood ? "" : "  FAILED", e0 == cudaSuccess ? "" : cudaGetErrorString(e0));
        a.int8Cache = true;
        a.keyInt8 = Int8Rows{dlc, dls, L, L};
        a.ropeInt8 = Int8Rows{drc, drs, R, R};
        a.keyA = a.value = a.keyB = nullptr;
        if (mlaDecodeServes(a)) {
            const DecodeResult codes = run();
            const double apart = relativeL2(lastOut, rowsOut);
            const cudaError_t e1 = cudaGetLastError();
            // Split: the rows' run carries K as bf16 hi + lo of code x scale (~16 bits, lo x lo dropped), the
            // codes' run K exact and Q's hi + lo: ~5e-6 apart expected.
            const bool good = e1 == cudaSuccess && apart <= (c.split ? 3e-5 : 1e-2) && codes.error <= 0.05;
            ok = ok && good;
            const double int8Bytes = static_cast<double>(c.context) * (L + R + 8);
            std::printf("  %-30s splits %2d  error %9.3g  %9.2f us  %7.0f GB/s  %5.2fx  from the rows' %9.3g%s%s\n",
                        "int8 cache, codes", codes.splits, codes.error, codes.us, int8Bytes / (codes.us * 1e-6) / 1e9,
                        tensor.us / codes.us, apart, good ? "" : "  FAILED", e1 == cudaSuccess ? "" : cudaGetErrorString(e1));
        }
        a.int8Cache = false;
        for (void* p : {static_cast<void*>(dlc), static_cast<void*>(drc), static_cast<void*>(dls), static_cast<void*>(drs),
                        static_cast<void*>(dlf), static_cast<void*>(drf)})
            cudaFree(p);
    }

    // launchMlaPrepare's 8-bit writes: a kv row's normalized latent and rotated rope part, quantized at the
    // last position, against float64: every value within half a step of its row's scale (and the scale
    // its row's largest magnitude / 127).
    {
        std::vector<float> kv(static_cast<std::size_t>(L + R)), norm(static_cast<std::size_t>(L)), invFreq(static_cast<std::size_t>(R / 2));
        for (auto& x : kv) x = rng.next() * 3.0f;
        for (auto& x : norm) x = 1.0f + 0.2f * rng.next();
        for (int i = 0; i < R / 2; ++i) invFreq[static_cast<std::size_t>(i)] = 1.0f / std::pow(1.0e4f, static_cast<float>(2 * i) / R);
        std::vector<double> want(static_cast<std::size_t>(L + R));
        double squares = 0;
        for (int d = 0; d < L; ++d) squares += static_cast<double>(kv[static_cast<std::size_t>(d)]) * kv[static_cast<std::size_t>(d)];
        const float eps = 1e-6f;
        const double inv = 1.0 / std::sqrt(squares / L + eps);
        for (int d = 0; d < L; ++d) want[static_cast<std::size_t>(d)] = kv[static_cast<std::size_t>(d)] * inv * norm[static_cast<std::size_t>(d)];
        for (int p = 0; p < R / 2; ++p) {  // interleaved pairs, as DeepSeek's
            const float angle = static_cast<float>(position) * invFreq[static_cast<std::size_t>(p)];
            const double co = std::cos(static_cast<double>(angle)), si = std::sin(static_cast<double>(angle));
            const double x = kv[static_cast<std::size_t>(L + 2 * p)], y = kv[static_cast<std::size_t>(L + 2 * p + 1)];
            want[static_cast<std::size_t>(L + 2 * p)] = x * co - y * si;
            want[static_cast<std::size_t>(L + 2 * p + 1)] = y * co + x * si;
        }
        float* dkv = upload(kv);
        float* dNorm = upload(norm);
        float* dInv = upload(invFreq);
        std::int8_t *dlc = nullptr, *drc = nullptr;
        float *dls = nullptr, *drs = nullptr, *dqRow = nullptr;
        bf16* dqNope = nullptr;
        cudaMalloc(&dlc, static_cast<std::size_t>(c.context) * L);
        cudaMalloc(&drc, static_cast<std::size_t>(c.context) * R);
        cudaMalloc(&dls, static_cast<std::size_t>(c.context) * sizeof(float));
        cudaMalloc(&drs, static_cast<std::size_t>(c.context) * sizeof(float));
        cudaMalloc(&dqRow, static_cast<std::size_t>(c.heads) * qHead * sizeof(float));
        cudaMemset(dqRow, 0, static_cast<std::size_t>(c.heads) * qHead * sizeof(float));
        cudaMalloc(&dqNope, 2 * static_cast<std::size_t>(c.heads) * nope * sizeof(bf16));
        launchMlaPrepare(dkv, L + R, dqRow, 1, c.heads, nope, L, dNorm, eps, RopeParams{dInv, R, true, 1.0f}, dStart, nullptr,
                         nullptr, dqNope, c.split, nullptr, Int8Rows{dlc, dls, L, L}, Int8Rows{drc, drs, R, R});
        cudaDeviceSynchronize();
        std::vector<std::int8_t> gotL(static_cast<std::size_t>(L)), gotR(static_cast<std::size_t>(R));
        float gotLs = 0, gotRs = 0;
        cudaMemcpy(gotL.data(), dlc + static_cast<std::size_t>(position) * L, L, cudaMemcpyDeviceToHost);
        cudaMemcpy(gotR.data(), drc + static_cast<std::size_t>(position) * R, R, cudaMemcpyDeviceToHost);
        cudaMemcpy(&gotLs, dls + position, sizeof(float), cudaMemcpyDeviceToHost);
        cudaMemcpy(&gotRs, drs + position, sizeof(float), cudaMemcpyDeviceToHost);
        const auto within = [&](const std::int8_t* codes, float scale, int begin, int n) {
            double largest = 0, worst = 0;
            for (int d = 0; d < n; ++d) largest = std::max(largest, std::abs(want[static_cast<std::size_t>(begin + d)]));
            for (int d = 0; d < n; ++d)
                worst = std::max(worst, std::abs(codes[d] * static_cast<double>(scale) - want[static_cast<std::size_t>(begin + d)]));
            return std::abs(scale - largest / 127.0) <= 1e-4 * largest / 127.0 && worst <= 0.5001 * scale;
        };
        const cudaError_t e = cudaGetLastError();
        const bool good = e == cudaSuccess && within(gotL.data(), gotLs, 0, L) && within(gotR.data(), gotRs, L, R);
        ok = ok && good;
        std::printf("  %-30s %s%s\n", "int8 writes (launchMlaPrepare)", good ? "within half a step" : "FAILED",
                    e == cudaSuccess ? "" : cudaGetErrorString(e));
        for (void* p : {static_cast<void*>(dkv), static_cast<void*>(dNorm), static_cast<void*>(dInv), static_cast<void*>(dlc),
                        static_cast<void*>(drc), static_cast<void*>(dls), static_cast<void*>(drs), static_cast<void*>(dqRow),
                        static_cast<void*>(dqNope)})
            cudaFree(p);
    }
    cudaFree(dqLatent);
    cudaFree(dq);
    cudaFree(dLatent);
    cudaFree(dRope);
    cudaFree(dStart);
    cudaFree(dOut);
    cudaFree(dPartials);
    cudaFree(dDone);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    // --variants: the key-head kernel's alternatives too; --only TEXT: only the decode cases named with it.
    // --prefill: only the prompt's kernels (GQA and MLA), not decode.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, also into a file a timeout may cut short
    bool variants = false, prefillOnly = false;
    const char* only = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--variants") == 0) variants = true;
        if (std::strcmp(argv[i], "--prefill") == 0) prefillOnly = true;
        if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    }
    const Case cases[] = {
        {"qwen3 512 from 0", 128, 32, 4, 512, 0, 0, true},
        {"qwen3 512 after 1536", 128, 32, 4, 512, 1536, 0, true},
        {"qwen3 2048 from 0", 128, 32, 4, 2048, 0, 0, true},
        {"qwen3 512 bf16", 128, 32, 4, 512, 0, 0, false},
        {"gpt-oss 300 after 50, window 128", 64, 64, 8, 300, 50, 128, true},
        {"fixture 7 after 3", 32, 4, 2, 7, 3, 0, true},
        {"fixture 5 bf16", 32, 4, 2, 5, 0, 0, false},
        {"multi-head 100 after 3", 128, 8, 8, 100, 3, 0, true},
        {"two tokens", 64, 16, 2, 2, 0, 0, true},
        // gpt-oss's sinks (a logit per query head joining each softmax, no value), sliding and full layers.
        {"gpt-oss 300 after 50, window 128, sinks", 64, 64, 8, 300, 50, 128, true, true},
        {"gpt-oss 512 from 0, full, sinks", 64, 64, 8, 512, 0, 0, true, true},
        {"gpt-oss 200 after 100, window 128, sinks, bf16", 64, 64, 8, 200, 100, 128, false, true},
        {"fixture 40 from 0, window 16, sinks", 32, 4, 2, 40, 0, 16, true, true},
        {"fixture 7 after 3, sinks", 32, 4, 2, 7, 3, 0, true, true},
        // Long contexts' last chunks (prefill's 2048-token chunks), split and with one-term P·V.
        {"qwen3 2048 after 14336", 128, 32, 4, 2048, 14336, 0, true, false, false, false},
        {"qwen3 2048 after 14336, one-term P.V", 128, 32, 4, 2048, 14336, 0, true, false, true, false},
        {"qwen3 2048 after 63488", 128, 32, 4, 2048, 63488, 0, true, false, false, false},
        {"qwen3 2048 after 63488, one-term P.V", 128, 32, 4, 2048, 63488, 0, true, false, true, false},
        {"qwen3 2048 after 63488, bf16", 128, 32, 4, 2048, 63488, 0, false, false, false, false},
        {"gpt-oss 2048 after 6144, sinks, one-term", 64, 64, 8, 2048, 6144, 0, true, true, true, false},
    };
    int failed = 0;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    if (!only)
        std::printf("%-40s %12s %12s %9s %9s %8s\n", "case", "flash error", "scalar error", "flash ms", "scalar ms", "TFLOP/s");
    for (const Case& c : cases) {
        if (only) break;
        const int hd = c.headDim, context = c.start + c.tokens;
        const int ldq = (c.heads + 2 * c.kvHeads) * hd, ldk = c.kvHeads * hd, ldOut = c.heads * hd;
        std::vector<float> q(static_cast<std::size_t>(c.tokens) * ldq), k(static_cast<std::size_t>(context) * ldk),
            v(k.size());
        // Keys with a per-key offset so that the softmax is far from uniform.
        for (auto& x : q) x = normal(rng);
        for (auto& x : k) x = normal(rng) * 1.5f;
        for (auto& x : v) x = normal(rng);
        // Sinks of the size of the scores and above (one head's sink dominating its softmax).
        std::vector<float> sinks(static_cast<std::size_t>(c.heads));
        for (std::size_t h = 0; h < sinks.size(); ++h) sinks[h] = 2.0f * normal(rng) + (h % 5 == 0 ? 6.0f : 1.0f);
        float* dq = upload(q);
        float* dk = upload(k);
        float* dv = upload(v);
        float* dSinks = upload(sinks);
        int* dStart = upload(std::vector<int>{c.start});
        bf16* dOut = nullptr;
        const std::size_t outCount = 2 * static_cast<std::size_t>(c.tokens) * ldOut;
        cudaMalloc(&dOut, outCount * sizeof(bf16));
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

        tandem::cuda::AttentionArgs a{};
        a.qA = dq;
        a.ldqA = ldq;
        a.qAHeadStride = hd;
        a.dimA = hd;
        a.keyA = dk;
        a.ldKeyA = ldk;
        a.value = dv;
        a.ldValue = ldk;
        a.dimV = hd;
        a.keyHeadStride = hd;
        a.group = c.heads / c.kvHeads;
        a.heads = c.heads;
        a.tokens = c.tokens;
        a.start = dStart;
        a.window = c.window;
        a.scale = scale;
        a.sinks = c.sinks ? dSinks : nullptr;
        a.out = dOut;
        a.ldOut = ldOut;
        a.outHeadStride = hd;
        a.split = c.split;
        a.oneTermValues = c.oneTermValues;
        a.splits = 1;

        // Sampled tokens: the first two, the last two and random ones.
        std::vector<int> tokens = {0, std::min(1, c.tokens - 1), c.tokens - 2 < 0 ? 0 : c.tokens - 2, c.tokens - 1};
        // (Fewer past 8K positions: the float64 reference of a 64K context takes seconds a token.)
        for (int i = 0; i < (context > 8192 ? 2 : 12); ++i) tokens.push_back(static_cast<int>(rng() % static_cast<unsigned>(c.tokens)));
        std::vector<double> reference;
        for (int t : tokens)
            for (int h = 0; h < c.heads; ++h) {
                const int position = c.start + t, g = h / a.group;
                const int first = c.window > 0 ? std::max(0, position - c.window + 1) : 0;
                std::vector<double> p;
                double m = -1e300;
                for (int j = first; j <= position; ++j) {
                    double s = 0;
                    for (int d = 0; d < hd; ++d)
                        s += static_cast<double>(q[static_cast<std::size_t>(t) * ldq + h * hd + d]) *
                             k[static_cast<std::size_t>(j) * ldk + g * hd + d];
                    p.push_back(s * scale);
                    m = std::max(m, p.back());
                }
                if (c.sinks) m = std::max(m, static_cast<double>(sinks[static_cast<std::size_t>(h)]));
                double l = c.sinks ? std::exp(sinks[static_cast<std::size_t>(h)] - m) : 0.0;  // the sink: no value
                for (double& x : p) l += (x = std::exp(x - m));
                for (int d = 0; d < hd; ++d) {
                    double o = 0;
                    for (int j = first; j <= position; ++j) o += p[static_cast<std::size_t>(j - first)] * v[static_cast<std::size_t>(j) * ldk + g * hd + d];
                    reference.push_back(o / l);
                }
            }

        auto run = [&](bool flash) {
            a.noFlash = !flash;
            std::vector<bf16> poison(outCount);
            const float nan = std::nanf("");
            for (auto& x : poison) x = __float2bfloat16(nan);
            cudaMemcpy(dOut, poison.data(), outCount * sizeof(bf16), cudaMemcpyHostToDevice);
            tandem::cuda::launchAttention(a, nullptr);
            cudaDeviceSynchronize();
            std::vector<bf16> out(outCount);
            cudaMemcpy(out.data(), dOut, outCount * sizeof(bf16), cudaMemcpyDeviceToHost);
            double num = 0, den = 0;
            std::size_t i = 0;
            for (int t : tokens)
                for (int h = 0; h < c.heads; ++h)
                    for (int d = 0; d < hd; ++d, ++i) {
                        const std::size_t at = static_cast<std::size_t>(t) * ldOut + h * hd + d;
                        double got = fromBf16(out[at]);
                        if (c.split) got += fromBf16(out[at + static_cast<std::size_t>(c.tokens) * ldOut]);
                        const double diff = std::isfinite(got) ? got - reference[i] : 1e30;
                        num += diff * diff;
                        den += reference[i] * reference[i];
                    }
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            cudaEventRecord(e0);
            constexpr int kReps = 5;
            for (int r = 0; r < kReps; ++r) tandem::cuda::launchAttention(a, nullptr);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            cudaEventDestroy(e0);
            cudaEventDestroy(e1);
            return Result{std::sqrt(num / den), ms / kReps};
        };
        const Result flash = run(true), scalar = c.scalar ? run(false) : Result{0.0, 0.0f};
        const cudaError_t e = cudaGetLastError();
        // Split: float32-like (the scalar kernel measures ~1e-6); bf16 products: the GPU path's 2e-2; one
        // fp16 term for P·V: fp16's rounding (2^-11) averaged over the keys.
        // Past 4096 positions the split bound grows with the square root of the context: these random
        // scores give a nearly flat softmax, whose output (a mean of random values) shrinks as 1/sqrt(keys)
        // while the products' rounding does not (the same error with the previous kernel: 5.5e-5 at 16K,
        // 2.3e-4 at 64K).
        const double bound = c.oneTermValues ? 2e-3 : c.split ? 1e-4 * std::max(1.0, std::sqrt(context / 4096.0)) : 2e-2;
        const bool ok = e == cudaSuccess && flash.error <= bound && scalar.error <= bound;
        if (!ok) ++failed;
        // The causal pairs' products (Q·K and P·V, 2 FLOPs a multiply-add each), window ignored.
        const double pairs = static_cast<double>(c.tokens) * (c.start + (c.tokens + 1) / 2.0) * c.heads;
        const double tflops = flash.ms > 0 ? pairs * 4.0 * hd / (flash.ms * 1e-3) / 1e12 : 0.0;
        std::printf("%-40s %12.3g %12.3g %9.3f %9.3f %8.1f%s%s\n", c.name, flash.error, scalar.error, flash.ms, scalar.ms,
                    tflops, ok ? "" : "  FAILED", e == cudaSuccess ? "" : cudaGetErrorString(e));
        cudaFree(dq);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dSinks);
        cudaFree(dStart);
        cudaFree(dOut);
    }
    const MlaCase mlaCases[] = {
        // name, heads, nope, rope, v, tokens, start, split, pass rows (0: one pass), absorbed latent (0: not timed)
        {"v2-lite 512 from 0", 16, 128, 64, 128, 512, 0, true, 0, 512},
        {"v2-lite 4096 from 0", 16, 128, 64, 128, 4096, 0, true, 0, 512},
        {"v2-lite 16384 from 0", 16, 128, 64, 128, 16384, 0, true, 0, 0},
        {"v2-lite 2048 after 14336 (16K's last chunk)", 16, 128, 64, 128, 2048, 14336, true, 0, 512},
        {"v2-lite 2048 after 14336, passes of 4096", 16, 128, 64, 128, 2048, 14336, true, 4096, 0},
        {"v2-lite 2048 after 14336, one-term P.V", 16, 128, 64, 128, 2048, 14336, true, 0, 0, true},
        {"v2-lite 16384 from 0, one-term P.V", 16, 128, 64, 128, 16384, 0, true, 0, 0, true},
        {"v2-lite 4096 from 0, bf16", 16, 128, 64, 128, 4096, 0, false, 0, 0},
        {"v2-lite 16384 from 0, bf16", 16, 128, 64, 128, 16384, 0, false, 0, 0},
        {"v3 (128 heads) 512 after 1536, passes of 1024", 128, 128, 64, 128, 512, 1536, true, 1024, 0},
        {"synthetic 64+32/64, 300 after 50", 4, 64, 32, 64, 300, 50, true, 0, 0},
        {"fixture 32+16/32, 7 after 3", 4, 32, 16, 32, 7, 3, true, 0, 0},
        {"fixture 32+16/32, 5, bf16", 4, 32, 16, 32, 5, 0, false, 0, 0},
        {"fixture 32+16/32, 100 after 37, passes of 64", 4, 32, 16, 32, 100, 37, true, 64, 0},
        {"two tokens", 16, 128, 64, 128, 2, 0, true, 0, 0},
    };
    if (!only) {
        std::printf("\nMLA prefill (non-absorbed flash kernel; ms of all passes; absorbed: the scalar kernel's ms)\n");
        std::printf("%-44s %10s %10s %8s %12s\n", "case", "error", "ms", "TFLOP/s", "absorbed ms");
    }
    for (const MlaCase& c : mlaCases)
        if (!only && !runMlaPrefillCase(c)) ++failed;

    if (prefillOnly) {
        std::printf("%s\n", failed ? "attention check FAILED" : "attention check: all within bounds");
        return failed ? 1 : 0;
    }
    const DecodeCase decodeCases[] = {
        // name, width, heads, key heads, context, window, split, prepare, rotary width, interleaved, norms
        {"qwen3 decode after 1", 128, 32, 4, 1, 0, true, true, 0, false, true},
        {"qwen3 decode after 100", 128, 32, 4, 100, 0, true, true, 0, false, true},
        {"qwen3 decode after 512", 128, 32, 4, 512, 0, true, true, 0, false, true},
        {"qwen3 decode after 4096", 128, 32, 4, 4096, 0, true, true, 0, false, true},
        {"qwen3 decode after 16384", 128, 32, 4, 16384, 0, true, true, 0, false, true},
        {"qwen3 decode after 16384, cache ready", 128, 32, 4, 16384, 0, true, false, 0, false, true},
        {"qwen3 decode after 16384, bf16", 128, 32, 4, 16384, 0, false, true, 0, false, true},
        {"qwen3 decode after 65536", 128, 32, 4, 65536, 0, true, true, 0, false, true},
        {"group 4 after 16384", 128, 32, 8, 16384, 0, true, true, 0, false, true},
        {"group 12 after 16384", 128, 96, 8, 16384, 0, true, true, 0, false, true},
        {"group 16 after 4097", 128, 32, 2, 4097, 0, true, true, 0, false, true},
        {"multi-head after 4096", 128, 32, 32, 4096, 0, true, true, 0, false, true},
        {"gpt-oss window 128 after 5000", 64, 64, 8, 5000, 128, true, true, 0, false, false},
        {"gpt-oss window 128 after 100", 64, 64, 8, 100, 128, true, false, 0, false, false},
        {"width 256, rotary 64 interleaved", 256, 16, 2, 8191, 0, true, true, 64, true, true},
        {"fixture after 37", 32, 4, 2, 37, 0, true, true, 0, false, true},
        {"fixture after 3000", 32, 4, 2, 3000, 0, true, true, 0, true, true},
        // gpt-oss's sinks: part 0 of a split context counts the sink, the combine once; one part alone
        // (context 1) normalizes with it directly.
        {"gpt-oss sinks window 128 after 5000", 64, 64, 8, 5000, 128, true, true, 0, false, false, true},
        {"gpt-oss sinks full after 4096", 64, 64, 8, 4096, 0, true, true, 0, false, false, true},
        {"gpt-oss sinks after 1", 64, 64, 8, 1, 0, true, true, 0, false, false, true},
        {"gpt-oss sinks window 128 after 100, cache ready", 64, 64, 8, 100, 128, true, false, 0, false, false, true},
        {"gpt-oss sinks full after 3000, bf16", 64, 64, 8, 3000, 0, false, true, 0, false, false, true},
        {"fixture sinks window 16 after 37", 32, 4, 2, 37, 16, true, true, 0, false, false, true},
        {"fixture sinks after 3000", 32, 4, 2, 3000, 0, true, true, 0, false, false, true},
    };
    std::printf("\ndecode (us a launch, L2 flushed; speed-up against the per-query-head kernel)\n");
    for (const DecodeCase& c : decodeCases)
        if ((!only || std::strstr(c.name, only)) && !runDecodeCase(c, variants)) ++failed;
    const MlaDecodeCase mlaDecodeCases[] = {
        // name, heads, latent, rope, context, split
        {"v2-lite decode after 1", 16, 512, 64, 1, true},
        {"v2-lite decode after 100", 16, 512, 64, 100, true},
        {"v2-lite decode after 512", 16, 512, 64, 512, true},
        {"v2-lite decode after 4096", 16, 512, 64, 4096, true},
        {"v2-lite decode after 16384", 16, 512, 64, 16384, true},
        {"v2-lite decode after 16384, bf16", 16, 512, 64, 16384, false},
        {"v2-lite decode after 65536", 16, 512, 64, 65536, true},
        {"v3 decode after 16384", 128, 512, 64, 16384, true},
        {"v3 decode after 4097, bf16", 128, 512, 64, 4097, false},
        {"mla synthetic decode after 300", 4, 64, 32, 300, true},
        {"mla fixture decode after 37", 4, 32, 16, 37, true},
        {"mla fixture decode after 3000", 4, 32, 16, 3000, true},
        {"mla 20 heads decode after 777", 20, 512, 64, 777, true},
    };
    std::printf("\nMLA decode (us a launch, L2 flushed; speed-up against the per-query-head kernel)\n");
    for (const MlaDecodeCase& c : mlaDecodeCases)
        if ((!only || std::strstr(c.name, only)) && !runMlaDecodeCase(c)) ++failed;
    std::printf("%s\n", failed ? "attention check FAILED" : "attention check: all within bounds");
    return failed ? 1 : 0;
}
