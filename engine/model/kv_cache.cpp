#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cpu/dense/ops.h"

namespace tandem::model {

namespace {

std::vector<int> groupsOf(const std::vector<int>& widths, const std::vector<int>& groupWidths) {
    std::vector<int> groups(widths.size(), 1);
    for (std::size_t s = 0; s < widths.size() && s < groupWidths.size(); ++s) {
        if (widths[s] == 0) continue;  // MLA without a rope part: one (unused) scale
        if (groupWidths[s] <= 0 || widths[s] % groupWidths[s] != 0)
            throw std::invalid_argument("KvCache: a group width must divide its stream's width");
        groups[s] = widths[s] / groupWidths[s];
    }
    return groups;
}

}  // namespace

void quantizeKvGroup(const float* x, int n, std::int8_t* codes, float* scale) {
    float largest = 0.0f;
    bool finite = true;
    for (int i = 0; i < n; ++i) {
        finite = finite && std::isfinite(x[i]);
        largest = std::max(largest, std::abs(x[i]));
    }
    if (!finite || largest == 0.0f) {
        // A zero group is zero codes. A NaN or infinity makes the scale NaN, so the rows that read the group
        // turn NaN as a float cache's would (the session's finiteness check then reports it).
        *scale = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        std::fill_n(codes, n, std::int8_t{0});
        return;
    }
    *scale = largest / 127.0f;
    const float inverse = 127.0f / largest;
    for (int i = 0; i < n; ++i)
        codes[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
}

KvCache::KvCache(int layers, std::vector<int> streamWidths, int capacity, KvCacheType type, std::vector<int> groupWidths)
    : widths_(std::move(streamWidths)), groups_(groupsOf(widths_, groupWidths)), layers_(layers), capacity_(capacity),
      type_(type) {
    const std::size_t n = static_cast<std::size_t>(layers) * widths_.size();
    if (quantized()) {
        codes_.resize(n);
        scales_.resize(n);
    } else {
        buffers_.resize(n);
    }
}

void KvCache::reserve(int positions) {
    if (positions <= reserved_) return;
    // The session checks the context length before a pass (Session::Impl::checkTokens).
    if (positions > capacity_) throw std::out_of_range("KvCache::reserve past the capacity");
    // Grow geometrically so a long decode reallocates only a few times.
    const int target = std::min(capacity_, std::max(positions, std::max(256, reserved_ * 2)));
    const auto rows = static_cast<std::size_t>(target);
    for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].resize(rows * widths_[i % widths_.size()]);
    // Int8, group-major: each group's rows move to their place in the larger buffer.
    const auto old = static_cast<std::size_t>(reserved_);
    for (std::size_t i = 0; i < codes_.size(); ++i) {
        const int stream = static_cast<int>(i % widths_.size());
        const auto groups = static_cast<std::size_t>(groups_[stream]), width = static_cast<std::size_t>(groupWidth(stream));
        std::vector<std::int8_t> codes(groups * rows * width);
        std::vector<float> scales(groups * rows);
        for (std::size_t g = 0; g < groups && old > 0; ++g) {
            std::copy_n(codes_[i].data() + g * old * width, old * width, codes.data() + g * rows * width);
            std::copy_n(scales_[i].data() + g * old, old, scales.data() + g * rows);
        }
        codes_[i] = std::move(codes);
        scales_[i] = std::move(scales);
    }
    reserved_ = target;
}

void KvCache::write(int layer, int stream, int position, const float* values) {
    if (!quantized()) {
        std::copy_n(values, widths_[stream], row(layer, stream, position));
        return;
    }
    const int g = groupWidth(stream);
    if (g == 0) return;
    for (int i = 0; i < groups_[stream]; ++i)
        quantizeKvGroup(values + i * g, g, codes(layer, stream, i, position), scale(layer, stream, i, position));
}

float KvCache::dot(int layer, int stream, int position, int offset, const float* q, int n) {
    if (!quantized()) return cpu::dot(q, row(layer, stream, position) + offset, static_cast<std::size_t>(n));
    if (n == 0) return 0.0f;
    const int group = offset / groupWidth(stream);
    const std::int8_t* c = codes(layer, stream, group, position) + offset % groupWidth(stream);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += q[i] * static_cast<float>(c[i]);
    return sum * *scale(layer, stream, group, position);
}

void KvCache::axpy(float a, int layer, int stream, int position, int offset, float* y, int n) {
    if (!quantized()) return cpu::axpy(a, row(layer, stream, position) + offset, y, static_cast<std::size_t>(n));
    if (n == 0) return;
    const int group = offset / groupWidth(stream);
    const std::int8_t* c = codes(layer, stream, group, position) + offset % groupWidth(stream);
    const float w = a * *scale(layer, stream, group, position);
    for (int i = 0; i < n; ++i) y[i] += w * static_cast<float>(c[i]);
}

std::uint64_t KvCache::bytesPerPosition(int layers, const std::vector<int>& streamWidths, const std::vector<int>& groupWidths,
                                        KvCacheType type) {
    const std::vector<int> groups = groupsOf(streamWidths, groupWidths);
    std::uint64_t perLayer = 0;
    for (std::size_t s = 0; s < streamWidths.size(); ++s)
        perLayer += type == KvCacheType::Int8 ? static_cast<std::uint64_t>(streamWidths[s]) + sizeof(float) * groups[s]
                                              : sizeof(float) * static_cast<std::uint64_t>(streamWidths[s]);
    return perLayer * static_cast<std::uint64_t>(layers);
}

std::uint64_t KvCache::bytesPerPosition() const {
    std::vector<int> groupWidths(widths_.size());
    for (std::size_t s = 0; s < widths_.size(); ++s) groupWidths[s] = std::max(1, widths_[s] / groups_[s]);
    return bytesPerPosition(layers_, widths_, groupWidths, type_);
}

}  // namespace tandem::model
