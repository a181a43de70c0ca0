#include "io/store_checksum.h"

#include <algorithm>
#include <cstring>


namespace tandem::io {

namespace {

constexpr std::uint64_t kMulA = 0x9e3779b97f4a7c15ull;  // odd: multiplying by it is a bijection
constexpr std::uint64_t kMulB = 0xd6e8feb86659fd93ull;

// Bijective in `lane` for a fixed word and in the word for a fixed lane, so changing any single
// word always changes the lane, and the later steps (bijections) carry the change to the end.
inline std::uint64_t step(std::uint64_t lane, std::uint64_t word) {
    lane = (lane ^ word) * kMulA;
    return lane ^ (lane >> 29);
}

inline std::uint64_t finish(std::uint64_t h) {
    h ^= h >> 32;
    h *= kMulB;
    return h ^ (h >> 29);
}

inline std::uint64_t load64(const std::byte* p) {
    std::uint64_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
}

}  // namespace

std::uint64_t hashBytes(std::span<const std::byte> bytes) {
    // Four independent lanes over 32-byte stripes keep four multiplies in flight, so hashing runs near
    // memory speed instead of at one multiply latency per word.
    std::uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
    const std::byte* p = bytes.data();
    std::size_t n = bytes.size();
    for (; n >= 32; p += 32, n -= 32)
        for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load64(p + 8 * i));
    if (n > 0) {
        std::byte tail[32] = {};
        std::memcpy(tail, p, n);
        for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load64(tail + 8 * i));
    }
    std::uint64_t h = bytes.size() * kMulB;
    for (const auto l : lane) h = (h ^ finish(l)) * kMulA;
    return finish(h);
}

void PieceHasher::stripe(const std::byte* p) {
    for (int i = 0; i < 4; ++i) lane_[i] = step(lane_[i], load64(p + 8 * i));
}

void PieceHasher::update(std::span<const std::byte> bytes) {
    total_ += bytes.size();
    const std::byte* p = bytes.data();
    std::size_t n = bytes.size();
    if (pendingBytes_ > 0) {
        const std::size_t take = std::min(n, 32 - pendingBytes_);
        std::memcpy(pending_ + pendingBytes_, p, take);
        pendingBytes_ += take;
        p += take;
        n -= take;
        if (pendingBytes_ < 32) return;
        stripe(pending_);
        pendingBytes_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(p);
    if (n > 0) {
        std::memcpy(pending_, p, n);
        pendingBytes_ = n;
    }
}

std::uint64_t PieceHasher::finish() const {
    // As hashBytes: the last partial stripe zero-padded, then the lanes folded with the length.
    std::uint64_t lane[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
    if (pendingBytes_ > 0) {
        std::byte tail[32] = {};
        std::memcpy(tail, pending_, pendingBytes_);
        for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load64(tail + 8 * i));
    }
    std::uint64_t h = total_ * kMulB;
    for (const auto l : lane) h = (h ^ tandem::io::finish(l)) * kMulA;
    return tandem::io::finish(h);
}

std::uint64_t foldPieceHashes(const std::vector<std::uint64_t>& pieces) {
    std::uint64_t h = pieces.size() * kMulA;
    for (const auto p : pieces) h = step(h, finish(p));
    return finish(h);
}

std::uint64_t checksumInPieces(std::span<const std::byte> bytes, std::size_t pieceBytes) {
    std::vector<std::uint64_t> pieces;
    for (std::size_t at = 0; at < bytes.size(); at += pieceBytes)
        pieces.push_back(hashBytes(bytes.subspan(at, std::min(pieceBytes, bytes.size() - at))));
    return foldPieceHashes(pieces);
}

std::uint64_t checksumInPieces(std::span<const std::byte> bytes, std::size_t pieceBytes, const ParallelFor& parallel,
                               const std::function<void(std::uint64_t)>& progress) {
    const std::size_t count = (bytes.size() + pieceBytes - 1) / pieceBytes;
    std::vector<std::uint64_t> pieces(count);
    // Rounds of a few pieces per thread, so progress moves while a large file is hashed.
    const std::size_t round = static_cast<std::size_t>(std::max(1, parallel.threads)) * 4;
    for (std::size_t first = 0; first < count; first += round) {
        const std::size_t last = std::min(count, first + round);
        parallel.run(last - first, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = first + begin; i < first + end; ++i) {
                const std::size_t at = i * pieceBytes;
                pieces[i] = hashBytes(bytes.subspan(at, std::min(pieceBytes, bytes.size() - at)));
            }
        });
        if (progress) progress(std::min<std::uint64_t>(bytes.size(), last * pieceBytes));
    }
    return foldPieceHashes(pieces);
}

std::string checksumText(std::uint64_t checksum) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, checksum >>= 4) s[i] = kHex[checksum & 0xf];
    return s;
}

void Fingerprint::add(std::string_view text) {
    add(static_cast<std::uint64_t>(text.size()));
    add(std::as_bytes(std::span(text.data(), text.size())));
}

void Fingerprint::add(std::uint64_t value) { h_ = step(h_, value); }

void Fingerprint::add(std::span<const std::byte> bytes) { h_ = step(h_, hashBytes(bytes)); }

}  // namespace tandem::io
