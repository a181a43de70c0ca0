#include "io/safetensors_writer.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/output_file.h"
#include "io/store_checksum.h"

namespace tandem::io {

namespace {

constexpr std::uint64_t kAlignment = 64;

std::uint64_t alignmentOf(std::uint64_t bytes) {
    return bytes == 0 ? kAlignment : std::min<std::uint64_t>(kAlignment, std::uint64_t{1} << std::countr_zero(bytes));
}

}  // namespace

SafetensorsPlan planSafetensors(std::vector<TensorSource> tensors, const std::map<std::string, std::string>& metadata) {
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSource& a, const TensorSource& b) {
        return alignmentOf(a.bytes()) > alignmentOf(b.bytes());
    });
    SafetensorsPlan plan;
    nlohmann::ordered_json header;
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::uint64_t at = 0;
    for (const auto& t : tensors) {
        header[t.name] = {{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes()}}};
        plan.begins.push_back(at);
        at += t.bytes();
    }
    plan.header = header.dump();
    while ((8 + plan.header.size()) % kAlignment != 0) plan.header += ' ';
    plan.fileBytes = 8 + plan.header.size() + at;
    plan.tensors = std::move(tensors);
    return plan;
}

std::uint64_t writeSafetensors(const SafetensorsPlan& plan, const std::filesystem::path& path, std::size_t pieceBytes,
                               const std::function<void(std::uint64_t)>& progress) {
    OutputFile file(path);
    std::vector<std::byte> piece;
    piece.reserve(pieceBytes);
    std::vector<std::uint64_t> hashes;
    std::uint64_t written = 0;
    auto flush = [&] {
        hashes.push_back(hashBytes(piece));
        file.writeAt(written, piece);
        written += piece.size();
        piece.clear();
        if (progress) progress(written);
    };
    // Appends bytes to the current piece, writing out each piece as it fills.
    auto put = [&](std::span<const std::byte> bytes) {
        while (!bytes.empty()) {
            const std::size_t n = std::min(bytes.size(), pieceBytes - piece.size());
            piece.insert(piece.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
            bytes = bytes.subspan(n);
            if (piece.size() == pieceBytes) flush();
        }
    };
    std::byte length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((plan.header.size() >> (8 * i)) & 0xff);
    put(length);
    put(std::as_bytes(std::span(plan.header.data(), plan.header.size())));
    // A produced tensor is made straight into the piece, in as many parts as it takes.
    auto produce = [&](const TensorSource& t) {
        for (std::uint64_t done = 0; done < t.producedBytes;) {
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(t.producedBytes - done, pieceBytes - piece.size()));
            const std::size_t at = piece.size();
            piece.resize(at + n);
            t.produce(done, {piece.data() + at, n});
            done += n;
            if (piece.size() == pieceBytes) flush();
        }
    };
    for (const auto& t : plan.tensors) {
        if (t.produce) produce(t);
        else put(t.data);
    }
    if (!piece.empty()) flush();
    file.syncAndDropCache();
    return foldPieceHashes(hashes);
}

}  // namespace tandem::io
