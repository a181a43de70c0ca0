#pragma once
// The forward pass of every model family, written once. A back end (the CPU path, model/transformer.h;
// the GPU path, runtime/gpu/gpu_runner.h) implements the four blocks for one pass over a run of tokens;
// runForward decides their order from the model's layer plan (model/layer_plan.h):
//
//   embed -> for every layer: attention block, feed-forward block -> head
//
// Attention block: x += o_proj(attention(input_norm(x))), appending the tokens' keys to the cache.
// Feed-forward block: x += ffn(post_attention_norm(x)), the FFN a dense MLP or a mixture of experts
// (router, routed and shared experts); with Expert Deferral, a layer that mayDefer holds back the d
// lowest-weighted of each token's experts, and the layer it defers to (deferredFrom) adds their output
// to its own (docs/ARCHITECTURE.md, "Expert Deferral").
// Head: final norm and lm_head for the rows whose logits are wanted.
#include <algorithm>
#include <vector>

#include "model/config.h"

namespace tandem::model {

// Of `requested` deferred experts, how many layer defers: none unless it mayDefer, and always at least
// one immediate expert of its topK.
inline int deferredExperts(const LayerPlan& layer, int topK, int requested) {
    return layer.mayDefer ? std::clamp(requested, 0, topK - 1) : 0;
}

class ForwardPass {
public:
    virtual ~ForwardPass() = default;
    virtual void embed() = 0;
    virtual void attentionBlock(const LayerPlan& layer) = 0;
    virtual void feedForwardBlock(const LayerPlan& layer) = 0;
    virtual void head() = 0;
};

// `layers`: the model's plan, or a back end's version of it (the GPU path's with experts placed on the GPU,
// runtime/placement.h, which changes only who defers).
inline void runForward(const std::vector<LayerPlan>& layers, ForwardPass& pass) {
    pass.embed();
    for (const LayerPlan& layer : layers) {
        pass.attentionBlock(layer);
        pass.feedForwardBlock(layer);
    }
    pass.head();
}

inline void runForward(const ModelConfig& config, ForwardPass& pass) { runForward(config.layers, pass); }

}  // namespace tandem::model
