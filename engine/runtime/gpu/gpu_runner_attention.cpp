// GpuRunner's attention block (gpu_runner.h): GQA and MLA, decode and prompt chunks, MLA's flash prefill
// over the decompressed context (cuda/mla_prefill.cu).
#include <algorithm>
#include <cstdio>

#include "cuda/gemm.h"
#include "cuda/host_sync.h"
#include "runtime/gpu/gpu_runner.h"
#include "runtime/gpu/gpu_runner_stages.h"
#include "tandem/tuning.h"

namespace tandem::cuda {

void GpuRunner::attentionBlock(const model::LayerPlan& layer) {
    const int l = layer.index, tokens = stepTokens_;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = config_.hiddenSize;
    stamp(l, kAttnBegin);
    if (streamingChunk_ && l == streamOrder_.front()) TANDEM_CUDA_CHECK(cudaEventRecord(attentionTimed_[0], stream_));
    if (!normalizedAhead_)
        launchRmsNorm(x_.get(), H, w.inputNorm.get(), config_.rmsNormEps, tokens, H, nullptr, 0, hBf16_.get(), H, split_,
                      stream_);
    normalizedAhead_ = false;
    if (layer.attention == model::AttentionKind::Mla)
        enqueueMla(layer, tokens);
    else
        enqueueGqa(layer, tokens);
    // o_proj adds straight into the residual stream.
    const int attnWidth = static_cast<int>(widthsOf(config_).attn);
    project(w.o.ref(), H, attnWidth, attnOut_.get(), attnWidth, tokens, x_.get(), H, true, w.oBias.get());  // bias: gpt-oss
    stamp(l, kAttnDone);
}

Int8Rows GpuRunner::int8Rows(int layer, bool b) {
    if (!int8Cache_) return {};
    const auto l = static_cast<std::size_t>(layer);
    const Widths w = widthsOf(config_);
    const int width = static_cast<int>(b ? w.cacheB : w.cacheA);
    return {(b ? codesB_ : codesA_)[l].get(), (b ? scalesB_ : scalesA_)[l].get(), width,
            width / static_cast<int>(cacheGroups(config_))};
}

void GpuRunner::dequantizeLayer(int layer, int tokens, int window, float* rowsA, float* rowsB) {
    for (const bool b : {false, true})
        if (float* rows = b ? rowsB : rowsA) {
            const Int8Rows q = int8Rows(layer, b);
            launchDequantizeRows(q, 0, start_.get(), tokens, capacity_, rows, q.width, stream_, window);
        }
}

void GpuRunner::enqueueGqa(const model::LayerPlan& layer, int tokens) {
    const model::ModelConfig& c = config_;
    const int l = layer.index;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = c.hiddenSize, hd = c.headDim;
    const int qkvWidth = (c.numHeads + 2 * c.numKvHeads) * hd;
    const int kvDim = c.numKvHeads * hd;
    // The 8-bit cache: the kernels below read its rows as float32, dequantized once the step's are written.
    float* kCache = int8Cache_ ? floatRowsA_.get() : cacheA_[static_cast<std::size_t>(l)].get();
    float* vCache = int8Cache_ ? floatRowsB_.get() : cacheB_[static_cast<std::size_t>(l)].get();
    project(w.qkv.ref(), qkvWidth, H, hBf16_.get(), H, tokens, qkv_.get(), qkvWidth, false,
            c.attentionBias ? w.qkvBias.get() : nullptr);
    stamp(l, kAttnProjected);
    AttentionArgs a{};
    a.qA = qkv_.get();
    a.ldqA = qkvWidth;
    a.qAHeadStride = hd;
    a.dimA = hd;
    a.keyA = kCache;
    a.ldKeyA = kvDim;
    a.value = vCache;
    a.ldValue = kvDim;
    a.dimV = hd;
    a.keyHeadStride = hd;
    a.group = c.numHeads / c.numKvHeads;
    a.heads = c.numHeads;
    a.tokens = tokens;
    a.start = start_.get();
    a.window = layer.window.value_or(0);
    a.scale = model::attentionSoftmaxScale(c);
    a.sinks = w.sinks ? w.sinks.get() : nullptr;  // gpt-oss
    a.out = attnOut_.get();
    a.ldOut = c.numHeads * hd;
    a.outHeadStride = hd;
    a.split = split_;
    a.splits = tokens == 1 ? decodeSplits_ : 1;
    a.decodeKernel = true;
    a.partials = attnPartials_.get();
    a.partsDone = attnPartsDone_.get();
    a.noFlash = !tuning().gpuFlashPrefill;
    // A prompt chunk (enqueued, not captured: inStart_ holds its first position) whose context reaches past
    // Tuning::gpuSplitAttentionUntil takes its attention's P·V in one fp16 term (Q·K stays split).
    a.oneTermValues = tokens > 1 && *inStart_.get() + tokens > tuning().gpuSplitAttentionUntil;
    // Decode: the attention kernel normalizes, rotates and caches the step's q/k/v itself (a kernel
    // fewer a layer); otherwise the prepare kernel does, in place.
    const float* qNorm = c.qkNorm ? w.qNorm.get() : nullptr;
    const float* kNorm = c.qkNorm ? w.kNorm.get() : nullptr;
    a.prepare = usesDecodeKernel(a) && hd <= 256 && !int8Cache_;
    if (a.prepare) {
        a.qNorm = qNorm;
        a.kNorm = kNorm;
        a.eps = c.rmsNormEps;
        a.rope = rope_;
        a.kNew = qkv_.get() + static_cast<long>(c.numHeads) * hd;
        a.vNew = a.kNew + kvDim;
        a.keyCache = kCache;
        a.valueCache = vCache;
    } else {
        launchGqaPrepare(qkv_.get(), tokens, c.numHeads, c.numKvHeads, hd, qNorm, kNorm, c.rmsNormEps, rope_, start_.get(),
                         kCache, vCache, stream_, int8Rows(l, false), int8Rows(l, true));
    }
    if (int8Cache_) {
        // Decode by key head reads the codes themselves (heads of 128 or 64); the other kernels, float32 rows.
        a.int8Cache = true;
        a.keyInt8 = int8Rows(l, false);
        a.valueInt8 = int8Rows(l, true);
        if (!usesDecodeKernel(a) || !keyHeadDecodeServes(a)) {
            a.int8Cache = false;
            a.keyInt8 = a.valueInt8 = {};
            dequantizeLayer(l, tokens, a.window, kCache, vCache);
        }
    }
    stamp(l, kAttnPrepared);
    launchAttention(a, stream_);
    stamp(l, kAttnScored);
}

void GpuRunner::enqueueMla(const model::LayerPlan& layer, int tokens) {
    const model::ModelConfig& c = config_;
    const int l = layer.index;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = c.hiddenSize, heads = c.numHeads, nope = c.qkNopeHeadDim, rd = c.qkRopeHeadDim;
    const int latent = c.kvLoraRank, vDim = c.vHeadDim, qHead = nope + rd;
    float* latentCache = int8Cache_ ? floatRowsA_.get() : cacheA_[static_cast<std::size_t>(l)].get();
    float* ropeCache = int8Cache_ ? floatRowsB_.get() : cacheB_[static_cast<std::size_t>(l)].get();

    const float* kv;
    int ldkv;
    if (c.qLoraRank > 0) {
        const int combWidth = c.qLoraRank + latent + rd;
        if (w.kva.rows) {  // q_a and kv_a apart (gpu_weights.cpp, layerParts), into the same columns
            project(w.qaKva.ref(), c.qLoraRank, H, hBf16_.get(), H, tokens, comb_.get(), combWidth, false);
            project(w.kva.ref(), latent + rd, H, hBf16_.get(), H, tokens, comb_.get() + c.qLoraRank, combWidth, false);
        } else {
            project(w.qaKva.ref(), combWidth, H, hBf16_.get(), H, tokens, comb_.get(), combWidth, false);
        }
        launchRmsNorm(comb_.get(), combWidth, w.qaNorm.get(), c.rmsNormEps, tokens, c.qLoraRank, nullptr, 0, qa_.get(),
                      c.qLoraRank, split_, stream_);
        project(w.q.ref(), heads * qHead, c.qLoraRank, qa_.get(), c.qLoraRank, tokens, q_.get(), heads * qHead, false);
        kv = comb_.get() + c.qLoraRank;
        ldkv = combWidth;
    } else {
        project(w.q.ref(), heads * qHead, H, hBf16_.get(), H, tokens, q_.get(), heads * qHead, false);
        project(w.kva.ref(), latent + rd, H, hBf16_.get(), H, tokens, comb_.get(), latent + rd, false);
        kv = comb_.get();
        ldkv = latent + rd;
    }
    stamp(l, kAttnProjected);
    launchMlaPrepare(kv, ldkv, q_.get(), tokens, heads, nope, latent, w.kvaNorm.get(), c.rmsNormEps, rope_, start_.get(),
                     latentCache, ropeCache, qNope_.get(), split_, stream_, int8Rows(l, false), int8Rows(l, true));
    stamp(l, kAttnPrepared);

    // Absorb each head's key expansion into its query: qLatent[h] = W_k[h]ᵀ qNope[h].
    const int rows = split_ ? 2 * tokens : tokens;
    const long kvbHead = static_cast<long>(nope + vDim) * latent;
    const bool decode = tokens == 1;
    if (!decode && mlaFlash_) {
        // The 8-bit cache: the flash prefill decompresses the latent from its codes, the rope rows as float32.
        if (int8Cache_) dequantizeLayer(l, tokens, 0, nullptr, ropeCache);
        enqueueMlaFlash(w, l, tokens);
        stamp(l, kAttnScored);
        return;
    }
    if (decode) {
        launchMlaAbsorb(w.kvb.get(), w.kvbLo.get(), kvbHead, heads, nope, latent, qNope_.get(), split_, qLatent_.get(),
                        stream_);
    } else {
        // FP8's kvbLo adds the second half of the weights' split.
        for (const bf16* kvb : {w.kvb.get(), w.kvbLo.get()})
            if (kvb)
                gemmBatchedBf16<float>(blas_, true, kvb, latent, kvbHead, latent, nope, qNope_.get(), heads * nope, nope,
                                       rows, qLatent_.get(), heads * latent, latent, heads, kvb == w.kvb.get() ? 0.0f : 1.0f);
        if (split_)
            launchPairSum(qLatent_.get(), heads * latent, tokens, heads * latent, qLatent_.get(), heads * latent, false, stream_);
    }

    AttentionArgs a{};
    a.qA = qLatent_.get();
    a.ldqA = heads * latent;
    a.qAHeadStride = latent;
    a.dimA = latent;
    a.qB = q_.get() + nope;
    a.ldqB = heads * qHead;
    a.qBHeadStride = qHead;
    a.dimB = rd;
    a.keyA = latentCache;
    a.ldKeyA = latent;
    a.keyB = ropeCache;
    a.ldKeyB = rd;
    a.value = latentCache;
    a.ldValue = latent;
    a.dimV = latent;
    a.keyHeadStride = 0;
    a.group = 1;
    a.heads = heads;
    a.tokens = tokens;
    a.start = start_.get();
    a.scale = model::attentionSoftmaxScale(c);
    a.out = ctx_.get();
    a.ldOut = heads * latent;
    a.outHeadStride = latent;
    a.split = split_;
    a.splits = tokens == 1 ? decodeSplits_ : 1;
    a.decodeKernel = true;
    a.partials = attnPartials_.get();
    a.partsDone = attnPartsDone_.get();
    // Decode on tensor cores by groups of 16 heads (mla_decode.cu); TANDEM_GPU_FLASH=0: a block per head.
    a.perHeadDecode = !tuning().gpuFlashPrefill;
    if (int8Cache_) {
        // The 8-bit cache: the tensor-core decode reads its codes; the other kernels, float32 rows.
        a.int8Cache = true;
        a.keyInt8 = int8Rows(l, false);
        a.ropeInt8 = int8Rows(l, true);
        if (!usesDecodeKernel(a) || !mlaDecodeServes(a)) {
            a.int8Cache = false;
            a.keyInt8 = a.ropeInt8 = {};
            dequantizeLayer(l, tokens, 0, latentCache, ropeCache);
        }
    }
    launchAttention(a, stream_);
    stamp(l, kAttnScored);

    // Expand to values per head: attnOut[h] = W_v[h] ctx[h].
    if (decode) {
        launchMlaValues(w.kvb.get(), w.kvbLo.get(), kvbHead, heads, nope, latent, vDim, ctx_.get(), split_, attnOut_.get(),
                        stream_);
        return;
    }
    for (const bf16* kvb : {w.kvb.get(), w.kvbLo.get()})
        if (kvb)
            gemmBatchedBf16<float>(blas_, false, kvb + static_cast<long>(nope) * latent, latent, kvbHead, vDim, latent,
                                   ctx_.get(), heads * latent, latent, rows, pairs_.get(), heads * vDim, vDim, heads,
                                   kvb == w.kvb.get() ? 0.0f : 1.0f);
    launchPairSumToBf16(pairs_.get(), heads * vDim, tokens, heads * vDim, attnOut_.get(), heads * vDim, split_, stream_);
}

void GpuRunner::enqueueMlaFlash(const GpuLayer& w, int layer, int tokens) {
    const model::ModelConfig& c = config_;
    const int heads = c.numHeads, nope = c.qkNopeHeadDim, rd = c.qkRopeHeadDim, latent = c.kvLoraRank, vDim = c.vHeadDim;
    const int kvWidth = heads * (nope + vDim);
    const float* latentCache = cacheA_[static_cast<std::size_t>(layer)].get();  // null with the 8-bit cache
    // Prompt chunks are enqueued, not captured: the chunk's first position is forward()'s host value.
    const int start = *inStart_.get(), context = start + tokens;
    MlaPrefillArgs a{};
    a.q = q_.get();  // [tokens][heads][nope | rope], the rope part rotated by launchMlaPrepare
    a.ldq = heads * (nope + rd);
    a.qHeadStride = nope + rd;
    a.kv = mlaKv_.get();
    a.ldkv = kvWidth;
    a.kvHeadStride = nope + vDim;
    a.ropeKeys = int8Cache_ ? floatRowsB_.get() : cacheB_[static_cast<std::size_t>(layer)].get();  // enqueueMla's float32 rows
    a.ldRope = rd;
    a.nope = nope;
    a.rope = rd;
    a.vDim = vDim;
    a.heads = heads;
    a.tokens = tokens;
    a.start = start;
    a.state = mlaState_.get();
    a.scale = model::attentionSoftmaxScale(c);
    a.out = attnOut_.get();
    a.ldOut = heads * vDim;
    a.outHeadStride = vDim;
    a.split = split_;
    a.oneTermValues = context > tuning().gpuSplitAttentionUntil;
    for (int p0 = 0; p0 < context; p0 += mlaPassRows_) {
        const int n = std::min(mlaPassRows_, context - p0);
        // k_nope and v of every head for the pass's positions: kv_b_proj (and FP8's kvbLo) times the
        // latent's hi (and lo) rows, summed by cuBLAS's beta.
        if (int8Cache_)
            launchDequantizeRowsToBf16(int8Rows(layer, false), p0, n, mlaLatent_.get(), split_, stream_);
        else
            launchToBf16(latentCache + static_cast<long>(p0) * latent, latent, n, latent, mlaLatent_.get(), latent, split_, stream_);
        bool first = true;
        for (const bf16* kvb : {w.kvb.get(), w.kvbLo.get()}) {
            if (!kvb) continue;
            for (int half = 0; half < (split_ ? 2 : 1); ++half) {
                gemmBf16(blas_, kvb, kvWidth, latent, mlaLatent_.get() + static_cast<long>(half) * n * latent, latent, n,
                         mlaKv_.get(), kvWidth, first ? 0.0f : 1.0f);
                first = false;
            }
        }
        a.kvFirst = p0;
        a.kvCount = n;
        a.firstPass = p0 == 0;
        a.lastPass = p0 + n >= context;
        launchMlaFlashPrefill(a, stream_);
    }
}

}  // namespace tandem::cuda
