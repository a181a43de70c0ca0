// GpuRunner's MoE layers (gpu_runner.h): the hand-over of routed experts to the CPU and back, routed
// experts the GPU holds, and prefill streaming of the CPU's layers (docs/ARCHITECTURE.md, "Placement").
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <thread>

#include "cuda/gemm.h"
#include "cuda/host_sync.h"
#include "runtime/gpu/gpu_runner.h"
#include "runtime/gpu/gpu_runner_stages.h"
#include "tandem/tuning.h"

namespace tandem::cuda {

void GpuRunner::enqueueSignal(int layer) {
    const MoeLayerLink& link = links_[static_cast<std::size_t>(layer)];
    launchSignal(controls_.devicePointer() + link.slot, counters_.get() + link.slot, layer, clocks_.devicePointer(), stream_);
}

void GpuRunner::enqueueWait(int layer) {
    const MoeLayerLink& link = links_[static_cast<std::size_t>(layer)];
    const SlotControl* controls = controls_.devicePointer();
    const bool previous = link.previous >= 0;
    launchWait(controls + link.slot, counters_.get() + link.slot, previous ? controls + link.previous : nullptr,
               previous ? counters_.get() + link.previous : nullptr, layer, clocks_.devicePointer(),
               failed_.devicePointer(), kCpuTimeoutSeconds, stream_);
}

bool GpuRunner::routesInOneKernel() const {
    // The row and the scores live in shared memory, next to ~1 KB of the kernel's own, within the 48 KB a
    // launch gets without opting in: any model up to a hidden size of ~10k.
    return (static_cast<std::size_t>(config_.hiddenSize) + 2 * static_cast<std::size_t>(config_.numExperts)) * sizeof(float) <=
           44 * 1024;
}

RouteDecodeArgs GpuRunner::routeDecodeArgs(int l, float* hF32) {
    const model::ModelConfig& c = config_;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    RouteDecodeArgs r{};
    r.x = x_.get();
    r.normWeight = w.postAttentionNorm.get();
    r.eps = c.rmsNormEps;
    r.hF32 = hF32;
    r.hBf16 = w.shared ? hBf16_.get() : nullptr;
    r.split = split_;
    r.w = w.router.get();
    r.experts = c.numExperts;
    r.hidden = c.hiddenSize;
    r.logitBias = w.routerBias ? w.routerBias.get() : nullptr;
    r.bias = w.correctionBias ? w.correctionBias.get() : nullptr;
    r.spec = c.router;
    r.logits = routerLogits_.get();
    r.blocksDone = routerCounter_.get();
    r.ids = routeIds_.get();
    r.weights = routeWeights_.get();
    return r;
}

ExpertEpilogue GpuRunner::expertEpilogue(int l) const {
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    ExpertEpilogue ep;
    ep.gateBias = w.expertGateBias ? w.expertGateBias.get() : nullptr;
    ep.upBias = w.expertUpBias ? w.expertUpBias.get() : nullptr;
    ep.downBias = w.expertDownBias ? w.expertDownBias.get() : nullptr;
    ep.clampedSwiglu = config_.expertActivation == model::ExpertActivation::ClampedSwiglu;
    ep.alpha = config_.swigluAlpha;
    ep.limit = config_.swigluLimit;
    return ep;
}

void GpuRunner::feedForwardBlock(const model::LayerPlan& layer) {
    const int l = layer.index, tokens = stepTokens_;
    const model::ModelConfig& c = config_;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = c.hiddenSize;
    if (!layer.moe) {
        launchRmsNorm(x_.get(), H, w.postAttentionNorm.get(), c.rmsNormEps, tokens, H, nullptr, 0, hBf16_.get(), H, split_,
                      stream_);
        enqueueMlp(*w.dense, tokens);
        return;
    }
    if (gpuExperts_.wholeLayer(l)) {
        enqueueGpuMoe(layer, gpuExperts_.table[static_cast<std::size_t>(l)].get());
        return;
    }
    if (streamingChunk_ && gpuExperts_.streams(l)) {
        const int i = streamCount_, b = i % 2;
        if (streamOrder_[static_cast<std::size_t>(i)] != l) throw GpuError("prefill streaming lost its order");
        if (i == 0) TANDEM_CUDA_CHECK(cudaEventRecord(attentionTimed_[1], stream_));
        if (!routedCopies_ && static_cast<std::size_t>(i) + 1 < streamOrder_.size()) issueStreamCopy(i + 1);
        const std::uint8_t* const* table = streamTables_.get() + static_cast<std::size_t>(i) * static_cast<std::size_t>(c.numExperts);
        if (streamCpuExperts_ == 0) {
            // Every expert copied (or held): the layer runs as one the GPU holds.
            enqueueGpuMoe(layer, table, copied_[b]);
        } else {
            // The CPU computes the first experts while the rest arrive.
            handOverMoe(layer, table, copied_[b]);
        }
        TANDEM_CUDA_CHECK(cudaEventRecord(used_[b], stream_));
        if (static_cast<std::size_t>(i) + 1 == streamOrder_.size()) TANDEM_CUDA_CHECK(cudaEventRecord(streamEnd_, stream_));
        ++streamCount_;
        return;
    }
    handOverMoe(layer, gpuExperts_.holdsSome(l) ? gpuExperts_.table[static_cast<std::size_t>(l)].get() : nullptr, nullptr);
}

void GpuRunner::handOverMoe(const model::LayerPlan& layer, const std::uint8_t* const* gpuTable, cudaEvent_t copied) {
    const int l = layer.index, tokens = stepTokens_;
    const model::ModelConfig& c = config_;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = c.hiddenSize, k = c.router.topK;
    const auto n = static_cast<std::size_t>(tokens);
    const MoeLayerLink& link = links_[static_cast<std::size_t>(l)];
    ExpertSlot& slot = slots_[link.slot];

    const std::size_t slotIndex = static_cast<std::size_t>(link.slot);
    auto onDevice = [](const auto* host, const auto& buffer) { return buffer.devicePointer() + (host - buffer.get()); };
    float* hostX = onDevice(slot.x, slotFloats_[slotIndex]);
    int* hostIds = onDevice(slot.ids, slotInts_[slotIndex]);
    float* hostWeights = onDevice(slot.weights, slotFloats_[slotIndex]);
    const float* bias = w.correctionBias ? w.correctionBias.get() : nullptr;
    // Decode: the norm, the router and the routing in one kernel (kernels.h), which also hands the layer
    // over to the CPU; and the wait and the add in one kernel (host_sync.h).
    const bool decode = tokens == 1 && routesInOneKernel();
    if (decode) {
        // The GPU's own experts (a split layer) read the normalized row from hF32.
        RouteDecodeArgs r = routeDecodeArgs(l, gpuTable ? hF32_.get() : nullptr);
        r.ids = hostIds;
        r.weights = hostWeights;
        r.hostHidden = hostX;
        r.control = controls_.devicePointer() + link.slot;
        r.counter = counters_.get() + link.slot;
        r.layer = l;
        r.clock = clocks_.devicePointer();
        launchRouterDecode(r, stream_);
    } else {
        launchRmsNorm(x_.get(), H, w.postAttentionNorm.get(), c.rmsNormEps, tokens, H, hF32_.get(), H, hBf16_.get(), H,
                      split_, stream_);
        gemmF32(blas_, w.router.get(), c.numExperts, H, hF32_.get(), H, tokens, routerLogits_.get(), c.numExperts);
        launchRouter(routerLogits_.get(), tokens, c.numExperts, w.routerBias ? w.routerBias.get() : nullptr, bias, c.router,
                     routeIds_.get(), routeWeights_.get(), stream_);
    }
    if (copied) markRouted(decode ? hostIds : routeIds_.get());
    stamp(l, kRouted);
    if (!decode) {
        launchExportToHost(hF32_.get(), tokens, H, routeIds_.get(), routeWeights_.get(), k, hostX, hostIds, hostWeights,
                           stream_);
        enqueueSignal(l);
        if (copied && l == streamOrder_.front()) TANDEM_CUDA_CHECK(cudaEventRecord(attentionTimed_[2], stream_));
    }
    stamp(l, kCopiedOut);

    // The shared experts run on the GPU while the CPU computes the routed ones.
    if (w.shared) enqueueMlp(*w.shared, tokens);
    stamp(l, kSharedDone);

    // The GPU's share of the routed experts (a split layer, or a streamed layer's copied experts, once
    // they have arrived), added into the residual while the CPU computes the rest. Decode's routing is
    // read back from the slot (mapped host memory, topK entries).
    if (gpuTable) {
        if (copied && routedCopies_) issueRoutedCopy();
        if (copied) TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied, 0));
        const ExpertPairs batch = launchGroupRoutes(decode ? hostIds : routeIds_.get(), decode ? hostWeights : routeWeights_.get(),
                                                    tokens, k, gpuTable, c.numExperts, groupStart_.get(), pairToken_.get(),
                                                    pairGroup_.get(), pairWeight_.get(), slotPair_.get(), stream_);
        const ExpertEpilogue ep = expertEpilogue(l);
        if (tokens <= kDecodeExpertTokens)
            launchExpertsDecode(gpuExperts_.layout, batch, hF32_.get(), H, x_.get(), H, true, expertScratch_.get(), stream_, {}, ep);
        else
            launchExpertsPrefill(gpuExperts_.layout, batch, hF32_.get(), H, x_.get(), H, true, prefillSplits_,
                                 expertScratch_.get(), stream_, ep);
    }

    const float* previous = nullptr;
    if (link.previous >= 0 && readDeferred_) {
        const std::size_t p = static_cast<std::size_t>(link.previous);
        previous = onDevice(slots_[p].deferredOut, slotFloats_[p]);
    }
    const float* immediate = onDevice(slot.immediateOut, slotFloats_[slotIndex]);
    if (decode) {
        const SlotControl* controls = controls_.devicePointer();
        const bool chained = link.previous >= 0;
        // The wait kernel also applies the norm that comes next: the next layer's input norm or the final one.
        FollowingNorm norm{followingNorm(l), c.rmsNormEps, hBf16_.get(), split_};
        launchWaitAdd(controls + link.slot, counters_.get() + link.slot, chained ? controls + link.previous : nullptr,
                      chained ? counters_.get() + link.previous : nullptr, l, clocks_.devicePointer(),
                      failed_.devicePointer(), kCpuTimeoutSeconds, immediate, previous, x_.get(), H, norm,
                      prefetch_[static_cast<std::size_t>(l)], stream_);
        normalizedAhead_ = true;
    } else {
        enqueueWait(l);
        launchAddFromHost(immediate, previous, x_.get(), static_cast<long>(n) * H, stream_);
    }
    stamp(l, kResultAdded);
}

void GpuRunner::issueStreamCopy(int i) {
    const int b = i % 2;
    const int layer = streamOrder_[static_cast<std::size_t>(i)];
    // The buffer's previous layer must be done before it is overwritten. The CPU's share (the first
    // streamCpuExperts_ experts) is not copied.
    const std::size_t skip = static_cast<std::size_t>(streamCpuExperts_) *
                             (gpuExperts_.streamLayerBytes / static_cast<std::size_t>(config_.numExperts));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(copyStream_, used_[b], 0));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(stage_[b].get() + skip, gpuExperts_.hostLayers[static_cast<std::size_t>(layer)] + skip,
                                      gpuExperts_.streamLayerBytes - skip, cudaMemcpyHostToDevice, copyStream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(copied_[b], copyStream_));
}

void GpuRunner::markRouted(const int* ids) {
    const auto E = static_cast<std::size_t>(config_.numExperts);
    launchMarkRouted(ids, stepTokens_ * config_.router.topK, config_.numExperts,
                     routedFlags_.devicePointer() + static_cast<std::size_t>(streamCount_) * E, stream_);
    if (routedCopies_) TANDEM_CUDA_CHECK(cudaEventRecord(routed_, stream_));
}

void GpuRunner::issueRoutedCopy() {
    // The router of this layer is a few kernels ahead of the GPU; the CPU's share is served meanwhile by
    // the bridge's helper thread (ServeMeanwhile), which shares this thread's core: poll and yield.
    cudaError_t state;
    while ((state = cudaEventQuery(routed_)) == cudaErrorNotReady) std::this_thread::yield();
    TANDEM_CUDA_CHECK(state);
    const int i = streamCount_, b = i % 2, layer = streamOrder_[static_cast<std::size_t>(i)];
    const auto E = static_cast<std::size_t>(config_.numExperts);
    const std::size_t expertBytes = gpuExperts_.streamLayerBytes / E;
    const volatile int* chosen = routedFlags_.get() + static_cast<std::size_t>(i) * E;
    const bool held = gpuExperts_.holdsSome(layer);
    auto copies = [&](std::size_t e) {
        return chosen[e] != 0 && !(held && gpuExperts_.hostTable[static_cast<std::size_t>(layer)][e]);
    };
    const std::uint8_t* from = gpuExperts_.hostLayers[static_cast<std::size_t>(layer)];
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(copyStream_, used_[b], 0));
    for (std::size_t e = static_cast<std::size_t>(streamCpuExperts_); e < E;) {
        if (!copies(e)) {
            ++e;
            continue;
        }
        std::size_t end = e + 1;
        while (end < E && copies(end)) ++end;
        const std::size_t bytes = (end - e) * expertBytes;
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(stage_[b].get() + e * expertBytes, from + e * expertBytes, bytes,
                                          cudaMemcpyHostToDevice, copyStream_));
        streamCopiedBytes_ += bytes;
        e = end;
    }
    TANDEM_CUDA_CHECK(cudaEventRecord(copied_[b], copyStream_));
}

double GpuRunner::chunkRoutedShare() const {
    const std::size_t n = streamOrder_.size() * static_cast<std::size_t>(config_.numExperts);
    if (n == 0) return 1.0;
    std::size_t chosen = 0;
    for (std::size_t i = 0; i < n; ++i) chosen += routedFlags_.get()[i] != 0;
    return static_cast<double>(chosen) / static_cast<double>(n);
}

void GpuRunner::prepareStreamShare(int tokens) {
    const model::ModelConfig& c = config_;
    const int percent = tuning().gpuStreamCpuPercent;
    // The verdicts are read only for a streamed chunk the model decides (not on every decode step).
    const int routed = tuning().gpuStreamRouted;
    routedCopies_ = streamingChunk_ && (routed >= 0 ? routed == 1 : gpuExperts_.copyChoice.routed(tokens));
    int share = 0;
    if (streamingChunk_ && percent >= 0)
        share = c.numExperts * percent / 100;
    else if (streamingChunk_ && !gpuExperts_.shareVerdicts[routedCopies_].vetoed(tokens)) {
        // Routed copies carry the chosen share of the experts, and start with the CPU's, after the router.
        runtime::StreamCost cost = gpuExperts_.streamCost;
        if (routedCopies_) cost.linkBytesPerSecond /= std::max(0.05, gpuExperts_.copyChoice.routedShare(tokens));
        share = runtime::streamCpuExperts(cost, c.numExperts, tokens, routedCopies_ ? 0.0 : gpuFirstSecondsPerToken_ * tokens,
                                          handOverSecondsPerToken_ * tokens);
    }
    streamCpuExperts_ = share;
    const int gpuFrom = streamingChunk_ ? share : c.numExperts;
    if (gpuFrom != bridgeGpuFrom_) {
        for (const int l : streamOrder_) bridge_->setGpuFrom(l, gpuFrom);
        bridgeGpuFrom_ = gpuFrom;
    }
    if (!streamingChunk_ || share == streamTablesShare_) return;
    // Each streamed layer's table: its held experts where they live, the copied ones in its staging
    // buffer, null for the CPU's.
    const auto E = static_cast<std::size_t>(c.numExperts);
    const std::size_t expertBytes = gpuExperts_.streamLayerBytes / E;
    std::vector<const std::uint8_t*> tables(streamOrder_.size() * E, nullptr);
    for (std::size_t i = 0; i < streamOrder_.size(); ++i) {
        const auto l = static_cast<std::size_t>(streamOrder_[i]);
        const std::uint8_t* stage = stage_[i % 2].get();
        for (std::size_t e = 0; e < E; ++e) {
            const std::uint8_t* held = gpuExperts_.holdsSome(static_cast<int>(l)) ? gpuExperts_.hostTable[l][e] : nullptr;
            tables[i * E + e] = held ? held : e >= static_cast<std::size_t>(share) ? stage + e * expertBytes : nullptr;
        }
    }
    TANDEM_CUDA_CHECK(cudaMemcpy(streamTables_.get(), tables.data(), tables.size() * sizeof(tables[0]), cudaMemcpyHostToDevice));
    streamTablesShare_ = share;
}

void GpuRunner::judgeStreamShare(int tokens) {
    float ms = 0;
    if (streamOrder_.empty() || cudaEventElapsedTime(&ms, attentionTimed_[0], streamEnd_) != cudaSuccess || ms <= 0) {
        cudaGetLastError();
        return;
    }
    const runtime::StreamCost& cost = gpuExperts_.streamCost;
    const double chosen = chunkRoutedShare();
    const double seconds = ms * 1e-3 / static_cast<double>(streamOrder_.size());
    // A whole layer's copy at the link's speed; routed copies carry the chosen share of it.
    const double wholeLayer =
        cost.linkBytesPerSecond > 0 ? static_cast<double>(gpuExperts_.streamLayerBytes) / cost.linkBytesPerSecond : 0.0;
    gpuExperts_.shareVerdicts[routedCopies_].record(tokens, streamCpuExperts_, seconds, wholeLayer * (routedCopies_ ? chosen : 1.0));
    gpuExperts_.copyChoice.record(tokens, routedCopies_, chosen, seconds, wholeLayer);
    if (tuning().gpuStreamLog)
        std::fprintf(stderr, "tandem: streamed chunk of %d tokens: %s copies, %.0f%% of the experts chosen, %.1f MB copied a layer, CPU share %d, %.3f ms a layer\n",
                     tokens, routedCopies_ ? "routed" : "whole-layer", 100 * chosen,
                     routedCopies_ ? static_cast<double>(streamCopiedBytes_) / 1e6 / static_cast<double>(streamOrder_.size())
                                   : static_cast<double>(gpuExperts_.streamLayerBytes) * (1.0 - static_cast<double>(streamCpuExperts_) / config_.numExperts) / 1e6,
                     streamCpuExperts_, ms / static_cast<double>(streamOrder_.size()));
}

void GpuRunner::enqueueGpuMoe(const model::LayerPlan& layer, const std::uint8_t* const* table, cudaEvent_t copied) {
    const int l = layer.index, tokens = stepTokens_;
    const model::ModelConfig& c = config_;
    const GpuLayer& w = weights_.layers[static_cast<std::size_t>(l)];
    const int H = c.hiddenSize, k = c.router.topK;
    std::optional<ExpertPairs> batch;
    if (tokens == 1 && routesInOneKernel()) {
        // Decode: the norm, the router's product, the routing and the batch of the chosen experts in one
        // kernel, with no hand-over.
        RouteDecodeArgs r = routeDecodeArgs(l, hF32_.get());
        r.table = table;
        r.slotExperts = slotExperts_.get();
        r.groupStart = groupStart_.get();
        r.pairToken = pairToken_.get();
        r.pairGroup = pairGroup_.get();
        r.pairWeight = pairWeight_.get();
        r.slotPair = slotPair_.get();
        launchRouterDecode(r, stream_);
        batch = decodeSlotBatch(r);
    } else {
        launchRmsNorm(x_.get(), H, w.postAttentionNorm.get(), c.rmsNormEps, tokens, H, hF32_.get(), H, hBf16_.get(), H,
                      split_, stream_);
        gemmF32(blas_, w.router.get(), c.numExperts, H, hF32_.get(), H, tokens, routerLogits_.get(), c.numExperts);
        launchRouter(routerLogits_.get(), tokens, c.numExperts, w.routerBias ? w.routerBias.get() : nullptr,
                     w.correctionBias ? w.correctionBias.get() : nullptr, c.router, routeIds_.get(), routeWeights_.get(), stream_);
    }
    if (copied) markRouted(routeIds_.get());
    stamp(l, kRouted);
    if (!batch)
        batch = launchGroupRoutes(routeIds_.get(), routeWeights_.get(), tokens, k, table, c.numExperts, groupStart_.get(),
                                  pairToken_.get(), pairGroup_.get(), pairWeight_.get(), slotPair_.get(), stream_);
    stamp(l, kCopiedOut);
    if (w.shared) enqueueMlp(*w.shared, tokens);
    stamp(l, kSharedDone);
    if (copied && routedCopies_) issueRoutedCopy();
    if (copied) TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied, 0));
    // x += the routed experts' weighted sum, straight into the residual.
    if (tokens == 1) {
        // The kernel's last block also applies the norm that comes next (the next layer's input norm or the
        // final one), as the wait kernel does for a layer handed to the CPU.
        DecodeNorm norm{followingNorm(l), c.rmsNormEps, hBf16_.get(), split_, expertsDone_.get()};
        launchExpertsDecode(gpuExperts_.layout, *batch, hF32_.get(), H, x_.get(), H, true, expertScratch_.get(), stream_, norm,
                            expertEpilogue(l));
        normalizedAhead_ = true;
    } else if (tokens <= kDecodeExpertTokens)
        launchExpertsDecode(gpuExperts_.layout, *batch, hF32_.get(), H, x_.get(), H, true, expertScratch_.get(), stream_, {},
                            expertEpilogue(l));
    else
        launchExpertsPrefill(gpuExperts_.layout, *batch, hF32_.get(), H, x_.get(), H, true, prefillSplits_,
                             expertScratch_.get(), stream_, expertEpilogue(l));
    stamp(l, kResultAdded);
}

}  // namespace tandem::cuda
