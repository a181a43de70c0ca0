#pragma once
// The packed store's own 64-bit checksum. It guards against damage (a truncated copy, a bad disk, a
// file from another conversion), not against tampering, so it only has to be fast and to change for any
// changed byte. Data is hashed in fixed pieces whose hashes are then folded in order: pieces hash
// independently, so a file is checked on all cores and an expert file's pieces are its experts, hashed
// by the thread that packed them while they are still in cache.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/parallel_for.h"

namespace tandem::io {

// Hash of one piece of bytes.
std::uint64_t hashBytes(std::span<const std::byte> bytes);

// hashBytes of bytes given in parts, for reading a piece from a file in chunks: finish() after any
// number of update() calls equals hashBytes of everything given, in order.
class PieceHasher {
public:
    void update(std::span<const std::byte> bytes);
    std::uint64_t finish() const;

private:
    void stripe(const std::byte* p);
    std::uint64_t lane_[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
    std::byte pending_[32] = {};
    std::size_t pendingBytes_ = 0;
    std::uint64_t total_ = 0;
};

// The checksum of a file from its pieces' hashes, in file order.
std::uint64_t foldPieceHashes(const std::vector<std::uint64_t>& pieces);

// Hash of bytes[0, n) cut into pieces of pieceBytes (the last may be shorter), on the calling thread.
std::uint64_t checksumInPieces(std::span<const std::byte> bytes, std::size_t pieceBytes);

// The same on the caller's threads (parallel), calling progress(bytes hashed so far) now and then from the
// calling thread.
std::uint64_t checksumInPieces(std::span<const std::byte> bytes, std::size_t pieceBytes, const ParallelFor& parallel,
                               const std::function<void(std::uint64_t)>& progress = {});

// 16 lowercase hex digits, as the manifest stores it (a JSON number cannot hold 64 bits safely).
std::string checksumText(std::uint64_t checksum);

// Incremental hashing of small identities (names, sizes), for fingerprints.
class Fingerprint {
public:
    void add(std::string_view text);
    void add(std::uint64_t value);
    void add(std::span<const std::byte> bytes);
    std::uint64_t value() const { return h_; }

private:
    std::uint64_t h_ = 0x5441'4e44'454d'0001ull;
};

}  // namespace tandem::io
