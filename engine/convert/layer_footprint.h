#pragma once
// One decoder layer's dense part as convert/footprint.cpp counts it, for the planners that size a layer
// (runtime/stage_plan.h) without a second formula.
#include <cstdint>

#include "model/config.h"

namespace tandem {

// The parameters of layer's attention, norms, router and shared experts (moe) or dense MLP (not moe):
// everything but its routed experts.
std::uint64_t layerDenseParameters(const model::ModelConfig& config, bool moe);

}  // namespace tandem
