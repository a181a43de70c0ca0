#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tandem::model {

double yarnMscale(double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// The rotary dimension index at which a frequency completes `rotations` turns over the original context.
double correctionDim(double rotations, int dim, double base, double maxPositions) {
    return dim * std::log(maxPositions / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

Rope::Rope(const ModelConfig& c) : dim_(c.ropeDim()), interleaved_(c.ropeInterleaved) {
    const int half = dim_ / 2;
    // Computed in float32 as transformers does, so positions far into the context rotate identically.
    std::vector<float> posFreq(static_cast<std::size_t>(half)), extrapolation(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
        posFreq[i] = std::pow(static_cast<float>(c.ropeTheta), static_cast<float>(2 * i) / static_cast<float>(dim_));
        extrapolation[i] = 1.0f / posFreq[i];
    }
    if (!c.yarn) {
        invFreq_ = extrapolation;
        return;
    }
    const YarnScaling& y = *c.yarn;
    // Like transformers: with original_max_position_embeddings, the factor is the context ratio.
    const double originalMax = y.originalMaxPositions.value_or(c.maxPositionEmbeddings);
    const double factor = y.originalMaxPositions ? c.maxPositionEmbeddings / *y.originalMaxPositions : y.factor;

    double low = correctionDim(y.betaFast, dim_, c.ropeTheta, originalMax);
    double high = correctionDim(y.betaSlow, dim_, c.ropeTheta, originalMax);
    if (y.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim_ - 1));
    if (low == high) high += 0.001;

    invFreq_.resize(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
        const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
        const float extrapolationWeight = 1.0f - ramp;
        const float interpolation = 1.0f / (static_cast<float>(factor) * posFreq[i]);
        invFreq_[i] = interpolation * (1.0f - extrapolationWeight) + extrapolation[i] * extrapolationWeight;
    }
    if (y.attentionFactor)
        attentionFactor_ = static_cast<float>(*y.attentionFactor);
    else if (y.mscale != 0.0 && y.mscaleAllDim != 0.0)
        attentionFactor_ = static_cast<float>(yarnMscale(factor, y.mscale) / yarnMscale(factor, y.mscaleAllDim));
    else
        attentionFactor_ = static_cast<float>(yarnMscale(factor, 1.0));
}

void Rope::angles(int position, float* cos, float* sin) const {
    for (std::size_t i = 0; i < invFreq_.size(); ++i) {
        const float a = static_cast<float>(position) * invFreq_[i];
        cos[i] = std::cos(a) * attentionFactor_;
        sin[i] = std::sin(a) * attentionFactor_;
    }
}

void Rope::rotate(float* x, const float* cos, const float* sin) const {
    const int half = dim_ / 2;
    for (int i = 0; i < half; ++i) {
        float& a = interleaved_ ? x[2 * i] : x[i];
        float& b = interleaved_ ? x[2 * i + 1] : x[i + half];
        const float a0 = a, b0 = b;
        a = a0 * cos[i] - b0 * sin[i];
        b = b0 * cos[i] + a0 * sin[i];
    }
}

float attentionSoftmaxScale(const ModelConfig& c) {
    double scale = 1.0 / std::sqrt(static_cast<double>(c.qkHeadDim()));
    if (c.attention == AttentionKind::Mla && c.yarn && c.yarn->mscaleAllDim != 0.0) {
        const double m = yarnMscale(c.yarn->factor, c.yarn->mscaleAllDim);
        scale *= m * m;
    }
    return static_cast<float>(scale);
}

}  // namespace tandem::model
