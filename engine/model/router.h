#pragma once
// Expert routing of one token: scores from the router logits, choice of the top-k experts (optionally
// limited to the best groups), and the weights their outputs are mixed with.
#include "model/config.h"

namespace tandem::model {

// logits: [numExperts]; bias: [numExperts] or nullptr (DeepSeek-V3's e_score_correction_bias, which
// steers the choice but not the weights). Writes spec.topK expert ids and weights, heaviest first, and
// with `choice` ([numExperts]) the scores the choice ranks: the softmax or sigmoid scores plus the bias,
// before any group limit (what a near-tie's margin is measured on).
void routeToken(const RouterSpec& spec, const float* logits, int numExperts, const float* bias, int* ids,
                float* weights, float* choice = nullptr);

}  // namespace tandem::model
