#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/dense/gqa_attention.h"
#include "cpu/dense/matmul.h"
#include "cpu/dense/ops.h"
#include "model/attention.h"
#include "tandem/tuning.h"

namespace tandem::model {

namespace {

// out = o_proj(ctx) (+ its bias, gpt-oss).
void project(const GqaWeights& w, const float* ctx, std::size_t tokens, float* out, cpu::ThreadPool& pool, const ModelConfig& c) {
    const auto H = static_cast<std::size_t>(c.hiddenSize);
    cpu::matmul(w.o, ctx, static_cast<std::size_t>(c.numHeads) * static_cast<std::size_t>(c.headDim), tokens, out, H, pool);
    if (!w.oBias.empty())
        for (std::size_t t = 0; t < tokens; ++t)
            for (std::size_t i = 0; i < H; ++i) out[t * H + i] += w.oBias[i];
}

}  // namespace

void gqaAttention(const AttentionStep& s, const GqaWeights& w, const float* x, float* out) {
    const ModelConfig& c = s.config;
    const std::size_t T = s.tokens, H = static_cast<std::size_t>(c.hiddenSize);
    const std::size_t hd = static_cast<std::size_t>(c.headDim);
    const std::size_t qDim = static_cast<std::size_t>(c.numHeads) * hd;
    const std::size_t kvDim = static_cast<std::size_t>(c.numKvHeads) * hd;
    const std::size_t half = static_cast<std::size_t>(s.rope.dim() / 2);

    std::vector<float> q(T * qDim), k(T * kvDim), v(T * kvDim);
    cpu::matmul(w.q, x, H, T, q.data(), qDim, s.pool);
    cpu::matmul(w.k, x, H, T, k.data(), kvDim, s.pool);
    cpu::matmul(w.v, x, H, T, v.data(), kvDim, s.pool);
    if (c.attentionBias)
        for (std::size_t t = 0; t < T; ++t) {
            for (std::size_t i = 0; i < qDim; ++i) q[t * qDim + i] += w.qBias[i];
            for (std::size_t i = 0; i < kvDim; ++i) {
                k[t * kvDim + i] += w.kBias[i];
                v[t * kvDim + i] += w.vBias[i];
            }
        }

    for (std::size_t t = 0; t < T; ++t) {
        for (int h = 0; h < c.numHeads; ++h) {
            float* qh = &q[t * qDim + h * hd];
            if (c.qkNorm) cpu::rmsNorm(qh, w.qNorm.data(), c.rmsNormEps, qh, hd);
            s.rope.rotate(qh, s.cos + t * half, s.sin + t * half);
        }
        for (int h = 0; h < c.numKvHeads; ++h) {
            float* kh = &k[t * kvDim + h * hd];
            if (c.qkNorm) cpu::rmsNorm(kh, w.kNorm.data(), c.rmsNormEps, kh, hd);
            s.rope.rotate(kh, s.cos + t * half, s.sin + t * half);
        }
        // Copied into a float32 cache; quantized per key head into an int8 one.
        s.cacheOf(t).write(s.layer.index, 0, s.position(t), &k[t * kvDim]);
        s.cacheOf(t).write(s.layer.index, 1, s.position(t), &v[t * kvDim]);
    }

    const float scale = attentionSoftmaxScale(c);
    const int group = c.numHeads / c.numKvHeads;
    std::vector<float> ctx(T * qDim);
    if (tuning().cpuAttentionKernels && cpu::selectedIsa() >= cpu::Isa::Avx2 && cpu::gqaAttentionFits(c.numHeads, c.numKvHeads, c.headDim)) {
        // Split by key head and chunk of positions, each key and value row read once per group. A decode
        // batch's tokens each attend to their own cache: one call per sequence.
        const std::size_t sequences = s.caches ? T : 1;
        for (std::size_t i = 0; i < sequences; ++i) {
            KvCache& cache = s.cacheOf(i);
            cpu::GqaAttentionArgs a;
            a.q = &q[i * qDim];
            if (cache.quantized()) {
                a.keyCodes = cache.codes(s.layer.index, 0, 0, 0);
                a.keyScales = cache.scale(s.layer.index, 0, 0, 0);
                a.valueCodes = cache.codes(s.layer.index, 1, 0, 0);
                a.valueScales = cache.scale(s.layer.index, 1, 0, 0);
                a.codesHead = cache.groupStride(0);
                a.scalesHead = cache.scaleGroupStride();
            } else {
                a.keys = cache.row(s.layer.index, 0, 0);
                a.values = cache.row(s.layer.index, 1, 0);
            }
            a.tokens = s.caches ? 1 : static_cast<int>(T);
            a.start = s.position(i);
            a.window = s.layer.window ? *s.layer.window : 0;
            a.heads = c.numHeads;
            a.kvHeads = c.numKvHeads;
            a.headDim = c.headDim;
            a.scale = scale;
            a.sinks = w.sinks.empty() ? nullptr : w.sinks.data();
            a.out = &ctx[i * qDim];
            if (cpu::selectedIsa() >= cpu::Isa::Avx512) cpu::gqaAttentionAvx512(a, s.pool);
            else cpu::gqaAttentionAvx2(a, s.pool);
        }
        project(w, ctx.data(), T, out, s.pool, c);
        return;
    }
    s.pool.parallelFor(T * static_cast<std::size_t>(c.numHeads), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<float> scores;
        for (std::size_t i = begin; i < end; ++i) {
            const std::size_t t = i / static_cast<std::size_t>(c.numHeads);
            const int h = static_cast<int>(i % static_cast<std::size_t>(c.numHeads));
            const int kvh = h / group;
            const int pos = s.position(t);
            KvCache& cache = s.cacheOf(t);
            const int first = s.layer.window ? std::max(0, pos - *s.layer.window + 1) : 0;
            const float* qh = &q[t * qDim + h * hd];
            // A sink (gpt-oss) is one more logit in the softmax, attached to no value.
            const std::size_t n = static_cast<std::size_t>(pos - first + 1);
            scores.resize(n + (w.sinks.empty() ? 0 : 1));
            const int offset = kvh * static_cast<int>(hd);
            if (!cache.quantized())
                for (int j = first; j <= pos; ++j)
                    scores[j - first] = cpu::dot(qh, cache.row(s.layer.index, 0, j) + kvh * hd, hd) * scale;
            else
                for (int j = first; j <= pos; ++j)
                    scores[j - first] = cache.dot(s.layer.index, 0, j, offset, qh, static_cast<int>(hd)) * scale;
            if (!w.sinks.empty()) scores[n] = w.sinks[static_cast<std::size_t>(h)];
            cpu::softmax(scores.data(), scores.size());
            float* o = &ctx[t * qDim + h * hd];
            std::fill_n(o, hd, 0.0f);
            if (!cache.quantized())
                for (int j = first; j <= pos; ++j) cpu::axpy(scores[j - first], cache.row(s.layer.index, 1, j) + kvh * hd, o, hd);
            else
                for (int j = first; j <= pos; ++j) cache.axpy(scores[j - first], s.layer.index, 1, j, offset, o, static_cast<int>(hd));
        }
    });
    project(w, ctx.data(), T, out, s.pool, c);
}

}  // namespace tandem::model
