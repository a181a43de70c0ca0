#pragma once
// The key/value cache of one conversation: for every layer, a few streams with a fixed width per position
// (GQA: keys and values; MLA: the compressed latent and the rotary key). It grows as the context grows, up
// to a fixed capacity.
//
// Two storage types (EngineOptions::kvCache, issue 28):
// - Float32 (the default): each stream a float32 row per position (row()).
// - Int8: each row cut into groups of groupWidth(stream) values (GQA: one key head's headDim values; MLA: the
//   whole latent row, the whole rope row), each group stored as int8 codes with one float scale
//   (symmetric: scale = the group's largest magnitude / 127, code = x / scale rounded to nearest, so a value
//   is off by at most half a step). Group-major: a stream's buffer holds group 0's rows of every position,
//   then group 1's, ... (codes(l, s, g, p) = base + (g * reserved + p) * groupWidth; the scales likewise,
//   scale(l, s, g, p) = scales + g * reserved + p), so the attention kernels read one key head's rows of a
//   run of positions as one sequential stream. A quarter of float32's bytes plus 4 bytes a group.
// write() stores a row in either type; the attention kernels read the int8 codes and scales directly.
// Rows are valid for positions below the last reserve().
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tandem/engine.h"

namespace tandem::model {

class KvCache {
public:
    // groupWidths: the values per scale of each stream (Int8; each divides its stream's width); empty: the
    // whole row is one group.
    KvCache(int layers, std::vector<int> streamWidths, int capacity, KvCacheType type = KvCacheType::Float32,
            std::vector<int> groupWidths = {});

    int capacity() const { return capacity_; }
    KvCacheType type() const { return type_; }
    bool quantized() const { return type_ == KvCacheType::Int8; }
    // Makes room for positions [0, positions) (never past the capacity: the session checks first).
    // Rows handed out earlier may move.
    void reserve(int positions);
    int width(int stream) const { return widths_[stream]; }

    // Float32: position's row of a stream.
    float* row(int layer, int stream, int position) {
        return buffers_[static_cast<std::size_t>(layer) * widths_.size() + stream].data() +
               static_cast<std::size_t>(position) * widths_[stream];
    }
    // Int8: group g of position's row, its groupWidth codes and its scale. Group g + 1's codes follow g's
    // groupStride() codes further (its scales scaleGroupStride() further); both change when reserve() grows.
    std::int8_t* codes(int layer, int stream, int group, int position) {
        return codes_[static_cast<std::size_t>(layer) * widths_.size() + stream].data() +
               (static_cast<std::size_t>(group) * reserved_ + position) * groupWidth(stream);
    }
    float* scale(int layer, int stream, int group, int position) {
        return scales_[static_cast<std::size_t>(layer) * widths_.size() + stream].data() + static_cast<std::size_t>(group) * reserved_ +
               position;
    }
    std::size_t groupStride(int stream) const { return static_cast<std::size_t>(reserved_) * groupWidth(stream); }
    std::size_t scaleGroupStride() const { return static_cast<std::size_t>(reserved_); }
    int groupWidth(int stream) const { return widths_[stream] / groups_[stream]; }
    int groups(int stream) const { return groups_[stream]; }

    // Stores `values` (width(stream) floats) as position's row: copied, or quantized group by group.
    void write(int layer, int stream, int position, const float* values);
    // The plain attention loops' reads, either type: values [offset, offset + n) of position's row (n within
    // one group when Int8) dotted with q, or added to y times a.
    float dot(int layer, int stream, int position, int offset, const float* q, int n);
    void axpy(float a, int layer, int stream, int position, int offset, float* y, int n);

    // Bytes a position takes, every layer and stream, in a cache of `type` (Int8: codes and scales).
    std::uint64_t bytesPerPosition() const;
    static std::uint64_t bytesPerPosition(int layers, const std::vector<int>& streamWidths, const std::vector<int>& groupWidths,
                                          KvCacheType type);

private:
    std::vector<int> widths_;
    std::vector<int> groups_;  // scales per row, per stream
    int layers_;
    int capacity_;
    KvCacheType type_;
    int reserved_ = 0;
    std::vector<std::vector<float>> buffers_;       // Float32
    std::vector<std::vector<std::int8_t>> codes_;   // Int8
    std::vector<std::vector<float>> scales_;        // Int8
};

// Quantizes n values to int8 codes with one scale (absmax / 127, rounded to nearest; 0 for a zero group).
void quantizeKvGroup(const float* x, int n, std::int8_t* codes, float* scale);

}  // namespace tandem::model
