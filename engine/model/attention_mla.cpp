#include <algorithm>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/dense/gqa_attention.h"
#include "cpu/dense/matmul.h"
#include "cpu/dense/ops.h"
#include "model/attention.h"
#include "tandem/tuning.h"

namespace tandem::model {

// For head h, kv_b_proj holds nope rows that expand the latent into keys, then v rows into values:
//   score(t, j) = q_nope[t]·(W_k c[j]) + q_rope[t]·k_rope[j] = (W_kᵀ q_nope[t])·c[j] + q_rope[t]·k_rope[j]
//   out(t)      = W_v Σ_j p(t, j) c[j]
// Both are exact rewrites of the expanded form in transformers.
void mlaAttention(const AttentionStep& s, const MlaWeights& w, const float* x, float* out) {
    const ModelConfig& c = s.config;
    const std::size_t T = s.tokens, H = static_cast<std::size_t>(c.hiddenSize);
    const std::size_t heads = static_cast<std::size_t>(c.numHeads);
    const std::size_t nope = static_cast<std::size_t>(c.qkNopeHeadDim);
    const std::size_t ropeDim = static_cast<std::size_t>(c.qkRopeHeadDim);
    const std::size_t vDim = static_cast<std::size_t>(c.vHeadDim);
    const std::size_t latent = static_cast<std::size_t>(c.kvLoraRank);
    const std::size_t qHead = nope + ropeDim;
    const std::size_t half = ropeDim / 2;

    // Queries.
    std::vector<float> q(T * heads * qHead);
    if (w.qA) {
        const std::size_t rank = static_cast<std::size_t>(c.qLoraRank);
        std::vector<float> qa(T * rank);
        cpu::matmul(*w.qA, x, H, T, qa.data(), rank, s.pool);
        for (std::size_t t = 0; t < T; ++t) cpu::rmsNorm(&qa[t * rank], w.qANorm.data(), c.rmsNormEps, &qa[t * rank], rank);
        cpu::matmul(w.q, qa.data(), rank, T, q.data(), heads * qHead, s.pool);
    } else {
        cpu::matmul(w.q, x, H, T, q.data(), heads * qHead, s.pool);
    }

    // Compressed keys and values into the cache.
    const std::size_t kvaWidth = latent + ropeDim;
    std::vector<float> kva(T * kvaWidth);
    cpu::matmul(w.kvA, x, H, T, kva.data(), kvaWidth, s.pool);
    for (std::size_t t = 0; t < T; ++t) {
        const int pos = s.position(t);
        KvCache& cache = s.cacheOf(t);
        if (!cache.quantized()) {
            cpu::rmsNorm(&kva[t * kvaWidth], w.kvANorm.data(), c.rmsNormEps, cache.row(s.layer.index, 0, pos), latent);
            float* kRope = cache.row(s.layer.index, 1, pos);
            std::copy_n(&kva[t * kvaWidth + latent], ropeDim, kRope);
            s.rope.rotate(kRope, s.cos + t * half, s.sin + t * half);
        } else {
            // Normalized and rotated in place, then quantized into the int8 cache (one scale per row).
            float* row = &kva[t * kvaWidth];
            cpu::rmsNorm(row, w.kvANorm.data(), c.rmsNormEps, row, latent);
            s.rope.rotate(row + latent, s.cos + t * half, s.sin + t * half);
            cache.write(s.layer.index, 0, pos, row);
            cache.write(s.layer.index, 1, pos, row + latent);
        }
        for (std::size_t h = 0; h < heads; ++h) s.rope.rotate(&q[(t * heads + h) * qHead + nope], s.cos + t * half, s.sin + t * half);
    }

    // Absorb W_k into the queries: qLatent[t, h] = W_kᵀ q_nope[t, h]. The head's nope rows are widened once
    // (nope x latent floats, in L2) and each token's latent row summed in L1, so a long prompt's rows are
    // written once instead of once per nope row.
    std::vector<float> qLatent(T * heads * latent, 0.0f);
    const std::size_t kvbHead = nope + vDim;
    s.pool.parallelFor(heads * T, std::max<std::size_t>(1, T / 4), [&](std::size_t begin, std::size_t end) {
        thread_local std::vector<float> rows;  // the buffer only; its rows are this chunk's
        rows.resize(nope * latent);
        std::size_t rowsHead = ~std::size_t{0};
        for (std::size_t i = begin; i < end; ++i) {
            const std::size_t h = i / T, t = i % T;
            if (rowsHead != h) {
                for (std::size_t d = 0; d < nope; ++d)
                    w.kvB.dequantRow(static_cast<std::int64_t>(h * kvbHead + d), rows.data() + d * latent);
                rowsHead = h;
            }
            float* out = &qLatent[(t * heads + h) * latent];
            const float* qn = &q[(t * heads + h) * qHead];
            for (std::size_t d = 0; d < nope; ++d) cpu::axpy(qn[d], rows.data() + d * latent, out, latent);
        }
    });

    // Attention over the latent context.
    const float scale = attentionSoftmaxScale(c);
    std::vector<float> ctxLatent(T * heads * latent);
    if (tuning().cpuAttentionKernels && cpu::selectedIsa() >= cpu::Isa::Avx2 && cpu::mlaAttentionFits(static_cast<int>(latent), static_cast<int>(ropeDim))) {
        // Split by chunk of positions and block of heads, each cached row read once per block. A decode
        // batch's tokens each attend to their own cache: one call per sequence.
        const std::size_t sequences = s.caches ? T : 1;
        for (std::size_t i = 0; i < sequences; ++i) {
            KvCache& cache = s.cacheOf(i);
            cpu::MlaAttentionArgs a;
            a.qLatent = &qLatent[i * heads * latent];
            a.qRope = &q[i * heads * qHead + nope];
            a.qRopeHead = qHead;
            if (cache.quantized()) {
                a.latentCodes = cache.codes(s.layer.index, 0, 0, 0);
                a.latentScales = cache.scale(s.layer.index, 0, 0, 0);
                a.ropeCodes = cache.codes(s.layer.index, 1, 0, 0);
                a.ropeScales = cache.scale(s.layer.index, 1, 0, 0);
            } else {
                a.latentRows = cache.row(s.layer.index, 0, 0);
                a.ropeRows = cache.row(s.layer.index, 1, 0);
            }
            a.tokens = s.caches ? 1 : static_cast<int>(T);
            a.start = s.position(i);
            a.heads = static_cast<int>(heads);
            a.latent = static_cast<int>(latent);
            a.ropeDim = static_cast<int>(ropeDim);
            a.scale = scale;
            a.out = &ctxLatent[i * heads * latent];
            if (cpu::selectedIsa() >= cpu::Isa::Avx512) cpu::mlaAttentionAvx512(a, s.pool);
            else cpu::mlaAttentionAvx2(a, s.pool);
        }
    } else s.pool.parallelFor(T * heads, 1, [&](std::size_t begin, std::size_t end) {
        std::vector<float> scores;
        for (std::size_t i = begin; i < end; ++i) {
            const std::size_t t = i / heads, h = i % heads;
            const int pos = s.position(t);
            KvCache& cache = s.cacheOf(t);
            const float* ql = &qLatent[i * latent];
            const float* qr = &q[i * qHead + nope];
            scores.resize(static_cast<std::size_t>(pos + 1));
            if (!cache.quantized())
                for (int j = 0; j <= pos; ++j)
                    scores[j] = (cpu::dot(ql, cache.row(s.layer.index, 0, j), latent) +
                                 cpu::dot(qr, cache.row(s.layer.index, 1, j), ropeDim)) * scale;
            else
                for (int j = 0; j <= pos; ++j)
                    scores[j] = (cache.dot(s.layer.index, 0, j, 0, ql, static_cast<int>(latent)) +
                                 cache.dot(s.layer.index, 1, j, 0, qr, static_cast<int>(ropeDim))) * scale;
            cpu::softmax(scores.data(), scores.size());
            float* o = &ctxLatent[(t * heads + h) * latent];
            std::fill_n(o, latent, 0.0f);
            if (!cache.quantized())
                for (int j = 0; j <= pos; ++j) cpu::axpy(scores[j], cache.row(s.layer.index, 0, j), o, latent);
            else
                for (int j = 0; j <= pos; ++j) cache.axpy(scores[j], s.layer.index, 0, j, 0, o, static_cast<int>(latent));
        }
    });

    // Expand to values per head: attn[t, h] = W_v ctxLatent[t, h].
    std::vector<float> attn(T * heads * vDim);
    for (std::size_t h = 0; h < heads; ++h)
        cpu::matmul(w.kvB.rowSlice(static_cast<std::int64_t>(h * kvbHead + nope), static_cast<std::int64_t>(vDim)),
                    &ctxLatent[h * latent], heads * latent, T, &attn[h * vDim], heads * vDim, s.pool);
    cpu::matmul(w.o, attn.data(), heads * vDim, T, out, H, s.pool);
}

}  // namespace tandem::model
