#pragma once
// One decoder layer as a forward pass runs it: the same description for the CPU and the GPU path
// (model/forward.h), made once from the model's family when its configuration is read.
#include <optional>

namespace tandem::model {

enum class AttentionKind {
    Gqa,  // grouped-query attention, optional per-head q/k RMSNorm (Qwen3)
    Mla,  // DeepSeek multi-head latent attention
};

struct LayerPlan {
    int index = 0;
    AttentionKind attention = AttentionKind::Gqa;
    std::optional<int> window;  // sliding-window attention over the last `window` positions
    bool moe = false;           // a mixture of experts; else a dense MLP
    // Expert Deferral (model/forward.h): a MoE layer followed by a MoE layer may leave its lowest-weighted
    // experts to overlap the next layer; `deferredFrom` is the layer whose deferred experts join this
    // one's output (-1: none).
    bool mayDefer = false;
    int deferredFrom = -1;
};

}  // namespace tandem::model
