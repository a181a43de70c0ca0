#pragma once
// Rotary position embeddings: the frequencies (plain, or YaRN-scaled with its attention-factor correction)
// and the rotation itself in the two layouts in use: halves (Qwen, Mixtral: x[i] pairs with x[i + d/2])
// and interleaved pairs (DeepSeek: x[2i] pairs with x[2i + 1]).
#include <vector>

#include "model/config.h"

namespace tandem::model {

class Rope {
public:
    explicit Rope(const ModelConfig& config);

    int dim() const { return dim_; }
    // cos and sin of every frequency at `position`, already multiplied by the attention factor;
    // each array holds dim/2 values.
    void angles(int position, float* cos, float* sin) const;
    // Rotates one head vector of dim() values in place.
    void rotate(float* x, const float* cos, const float* sin) const;

    const std::vector<float>& inverseFrequencies() const { return invFreq_; }
    float attentionFactor() const { return attentionFactor_; }

private:
    int dim_;
    bool interleaved_;
    std::vector<float> invFreq_;
    float attentionFactor_ = 1.0f;
};

// The softmax scale of attention: 1/sqrt(q·k width), times DeepSeek's mscale² under YaRN.
float attentionSoftmaxScale(const ModelConfig& config);

// YaRN's magnitude correction: 0.1 * mscale * ln(scale) + 1 for scale > 1.
double yarnMscale(double scale, double mscale);

}  // namespace tandem::model
