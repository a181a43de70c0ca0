#include "model/kv_cache.h"

#include <algorithm>
#include <string>

#include "tandem/error.h"

namespace tandem::model {

KvCache::KvCache(int layers, std::vector<int> streamWidths, int capacity)
    : widths_(std::move(streamWidths)), capacity_(capacity),
      buffers_(static_cast<std::size_t>(layers) * widths_.size()) {}

void KvCache::reserve(int positions) {
    if (positions <= reserved_) return;
    if (positions > capacity_)
        throw Error("the conversation needs " + std::to_string(positions) + " tokens of context, but the context length is " +
                    std::to_string(capacity_) + "; start a new conversation or raise the context length");
    // Grow geometrically so a long decode reallocates only a few times.
    const int target = std::min(capacity_, std::max(positions, std::max(256, reserved_ * 2)));
    for (std::size_t i = 0; i < buffers_.size(); ++i)
        buffers_[i].resize(static_cast<std::size_t>(target) * widths_[i % widths_.size()]);
    reserved_ = target;
}

}  // namespace tandem::model
