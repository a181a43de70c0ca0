#include "model/kv_cache.h"

#include <algorithm>
#include <stdexcept>


namespace tandem::model {

KvCache::KvCache(int layers, std::vector<int> streamWidths, int capacity)
    : widths_(std::move(streamWidths)), capacity_(capacity),
      buffers_(static_cast<std::size_t>(layers) * widths_.size()) {}

void KvCache::reserve(int positions) {
    if (positions <= reserved_) return;
    // The session checks the context length before a pass (Session::Impl::checkTokens).
    if (positions > capacity_) throw std::out_of_range("KvCache::reserve past the capacity");
    // Grow geometrically so a long decode reallocates only a few times.
    const int target = std::min(capacity_, std::max(positions, std::max(256, reserved_ * 2)));
    for (std::size_t i = 0; i < buffers_.size(); ++i)
        buffers_[i].resize(static_cast<std::size_t>(target) * widths_[i % widths_.size()]);
    reserved_ = target;
}

}  // namespace tandem::model
