#pragma once
// tandem-verified.json: the record that a packed store was read in full once and matched its manifest.
//
// Opening a store checks each file's size and first page only, which misses damage further in (a bad
// sector, a bit flipped in a copy). Reading all of a 500 GB store at every load is out of the question,
// so it is read once -- at the end of a conversion (whose checksums were taken from the bytes as they
// were written) or by a full verification -- and the result is recorded beside the manifest:
//
//   per file:  its size and modification time (ns) when it was read, the checksum found, intact or not,
//              and the hashes of a few sampled windows (offsets recorded with them)
//   overall:   intact or damaged, when, how (conversion or full read) and by which Tandem
//
// At every load the record is checked against the store (checkVerification, milliseconds): every file
// must still have the size and modification time it was verified with and the checksum the manifest
// gives, and the sampled windows (about 4 MiB in all, at least two windows per file) must still hash
// to what was recorded. Then the store counts as verified. A missing or stale record, or a sampled
// window that differs, makes it unverified: it still loads, and the caller runs the full verification
// (in the background in the app). A record that says damaged, for files that have not changed since,
// makes it damaged: loading refuses it.
//
// The sampled windows are what catches damage that keeps a file's size and time (a copy that kept the
// times, bit rot); they cannot be worked out from the manifest (its checksums cover whole pieces of
// up to 64 MiB), so the windows are hashed and recorded when the record is written. Their offsets are
// pseudo-random but deterministic: spread over the file (one per equal stretch), 4 KiB aligned, seeded
// by the file's name, size and checksum.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/store_manifest.h"

namespace tandem::io {

inline constexpr const char* kStoreRecordName = "tandem-verified.json";
// The sampled windows: kSampleBudgetBytes across the store, each kSampleWindowBytes, at least
// kMinSamplesPerFile and at most kMaxSamplesPerFile per file (DeepSeek-V3's 59 files: 2 each, 7.4 MiB).
inline constexpr std::uint64_t kSampleWindowBytes = std::uint64_t{64} << 10;
inline constexpr std::uint64_t kSampleBudgetBytes = std::uint64_t{4} << 20;
inline constexpr int kMinSamplesPerFile = 2;
inline constexpr int kMaxSamplesPerFile = 16;

struct FileStamp {
    std::uint64_t bytes = 0;
    std::int64_t mtimeNs = 0;  // st_mtim in nanoseconds since the epoch
    bool operator==(const FileStamp&) const = default;
};
// nullopt when the file cannot be stat'ed.
std::optional<FileStamp> stampFile(const std::filesystem::path& path);

struct SampleHash {
    std::uint64_t offset = 0, bytes = 0, hash = 0;
};

struct VerifiedFile {
    std::string name;
    FileStamp stamp;
    std::uint64_t checksum = 0;       // what the read found (the manifest's, when intact)
    bool intact = false;
    std::string problem;              // when not intact: what was found
    std::vector<SampleHash> samples;  // intact files only
};

enum class VerifiedBy { Conversion, FullRead };

struct VerificationRecord {
    bool intact = false;
    std::string verifiedAt;  // UTC, "2025-06-01T12:34:56Z"
    VerifiedBy method = VerifiedBy::FullRead;
    std::string program;     // "tandem 0.1.0"
    std::vector<VerifiedFile> files;

    const VerifiedFile* find(const std::string& name) const;
};

std::string recordToJson(const VerificationRecord& record);
// Throws Error naming `where` for a malformed record.
VerificationRecord recordFromJson(const std::string& text, const std::string& where);
// dir/tandem-verified.json; nullopt when there is none. Throws Error when it cannot be read or parsed.
std::optional<VerificationRecord> readRecord(const std::filesystem::path& dir);
// Replaces dir/tandem-verified.json atomically. Throws OutputError (a read-only folder, a full disk).
void writeRecord(const std::filesystem::path& dir, const VerificationRecord& record);

// The files a record covers, in the order they are verified: model.safetensors, then each MoE layer's
// expert file. A layer the manifest does not list is left out (opening the store refuses that).
std::vector<StoreFile> checkedFiles(const StoreManifest& manifest);

struct SampleWindow {
    std::uint64_t offset = 0, bytes = 0;
};
// Where a file's windows go; `files` is how many files the store has (they share the budget).
std::vector<SampleWindow> sampleWindows(const StoreFile& file, std::size_t files);

// The current time as the record writes it.
std::string utcNow();

enum class VerificationState { Verified, Unverified, Damaged };
struct VerificationStatus {
    VerificationState state = VerificationState::Unverified;
    // Verified: when and how. Unverified: why (never verified, which file changed). Damaged: which
    // files, when it was found, and what to do.
    std::string message;
};

// The cheap check at load: the record against the files' sizes and times and the sampled windows.
// Never throws: a record that cannot be read makes the store unverified.
VerificationStatus checkVerification(const std::filesystem::path& dir, const StoreManifest& manifest);

// What to do about a damaged store (a sentence): the commands that make it again; nothing is deleted.
std::string damageAdvice(const std::filesystem::path& dir, const StoreManifest& manifest);

struct VerifyOptions {
    int threads = 0;           // reading threads; <= 0: one per hardware thread, at most 8
    bool lowPriority = false;  // the threads run at a low priority (niceness 10): the app verifies while chatting
    // fraction done (0..1), from the calling thread at the start, about ten times a second and at the
    // end; false stops the reading.
    std::function<bool(double)> progress;
    std::string program;       // written into the record
    bool writeRecord = true;   // false: only report (PackedStore::findDamage)
};

struct VerifyResult {
    bool cancelled = false;
    VerificationRecord record;        // when not cancelled
    std::vector<std::string> damage;  // one line per damaged file, naming it; empty: intact
    std::string recordProblem;        // why the record could not be written (the result still holds)
};

// Reads every byte of the store's files (pread, so an unreadable sector is reported, not a SIGBUS)
// against the manifest's checksums and writes the record (intact or damaged) unless cancelled.
// Deletes nothing.
VerifyResult verifyStoreFiles(const std::filesystem::path& dir, const StoreManifest& manifest, const VerifyOptions& options);

// The record of a conversion that just finished: the manifest's checksums (taken from the bytes as
// they were written), the files' sizes and times, and the sampled windows, which are read back (a few
// MiB, not the store). Throws Error when a file cannot be read.
VerificationRecord recordConversion(const std::filesystem::path& dir, const StoreManifest& manifest, const std::string& program);

}  // namespace tandem::io
