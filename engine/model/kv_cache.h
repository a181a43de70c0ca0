#pragma once
// The key/value cache of one conversation: for every layer, a few float32 streams with a fixed width per
// position (GQA: keys and values; MLA: the compressed latent and the rotary key). It grows as the
// context grows, up to a fixed capacity.
#include <vector>

namespace tandem::model {

class KvCache {
public:
    KvCache(int layers, std::vector<int> streamWidths, int capacity);

    int capacity() const { return capacity_; }
    // Makes room for positions [0, positions) (never past the capacity: the session checks first).
    // Rows handed out earlier may move.
    void reserve(int positions);
    float* row(int layer, int stream, int position) {
        return buffers_[static_cast<std::size_t>(layer) * widths_.size() + stream].data() +
               static_cast<std::size_t>(position) * widths_[stream];
    }
    int width(int stream) const { return widths_[stream]; }

private:
    std::vector<int> widths_;
    int capacity_;
    int reserved_ = 0;
    std::vector<std::vector<float>> buffers_;
};

}  // namespace tandem::model
