#include "io/store_verification.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <system_error>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "io/output_file.h"
#include "io/store_checksum.h"
#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRecordFormat = "tandem-store-verification";
constexpr int kRecordVersion = 1;
// Each reading thread's buffer: pieces (an expert, 64 MiB of model.safetensors) are read in chunks.
constexpr std::size_t kReadChunk = std::size_t{1} << 20;

// A store file open for reading, with its size and time as of opening.
class InputFile {
public:
    explicit InputFile(const fs::path& path) : path_(path) {
        // O_NONBLOCK: a FIFO in place of a store file must not block; it is refused below.
        fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd_ < 0) {
            error_ = errno == ENOENT ? "it is missing" : std::string("it cannot be opened (") + std::strerror(errno) + ")";
            return;
        }
        struct stat st {};
        if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
            error_ = "it is not a regular file";
            return;
        }
        stamp_ = {static_cast<std::uint64_t>(st.st_size),
                  static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    }
    ~InputFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    const FileStamp& stamp() const { return stamp_; }

    // The hash of [offset, offset + bytes), read in chunks through `buffer`. An empty string on
    // success, else what went wrong (an I/O error, the file ending early).
    std::string hash(std::uint64_t offset, std::uint64_t bytes, std::vector<std::byte>& buffer, std::uint64_t& out,
                     std::atomic<std::uint64_t>* progress = nullptr, const std::atomic<bool>* stop = nullptr) const {
        PieceHasher hasher;
        while (bytes > 0) {
            // A piece can be 64 MiB: a verification that is stopped (the app closing) ends within a chunk.
            if (stop && stop->load(std::memory_order_relaxed)) return "stopped";
            const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, buffer.size()));
            const ssize_t n = ::pread(fd_, buffer.data(), want, static_cast<off_t>(offset));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return "it cannot be read at byte " + std::to_string(offset) + " (" + std::strerror(errno) + ")";
            if (n == 0) return "it ends at byte " + std::to_string(offset) + ", before its recorded size";
            hasher.update({buffer.data(), static_cast<std::size_t>(n)});
            offset += static_cast<std::uint64_t>(n);
            bytes -= static_cast<std::uint64_t>(n);
            if (progress) progress->fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        }
        out = hasher.finish();
        return {};
    }

    std::vector<SampleHash> hashSamples(const std::vector<SampleWindow>& windows, std::string& problem) const {
        std::vector<std::byte> buffer(kSampleWindowBytes);
        std::vector<SampleHash> samples;
        for (const auto& w : windows) {
            std::uint64_t h = 0;
            problem = hash(w.offset, w.bytes, buffer, h);
            if (!problem.empty()) return {};
            samples.push_back({w.offset, w.bytes, h});
        }
        return samples;
    }

private:
    fs::path path_;
    int fd_ = -1;
    FileStamp stamp_;
    std::string error_;
};

std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

const char* methodName(VerifiedBy m) { return m == VerifiedBy::Conversion ? "conversion" : "full-read"; }

std::string when(const VerificationRecord& r) {
    return r.verifiedAt + (r.method == VerifiedBy::Conversion ? " (by its conversion)" : " (by a full read)");
}

// Field access with errors that name the record and the field.
class Reader {
public:
    explicit Reader(std::string where) : where_(std::move(where)) {}
    const nlohmann::json& field(const nlohmann::json& o, const char* key) const {
        const auto it = o.find(key);
        if (it == o.end()) throw fail(std::string(key) + " is missing");
        return *it;
    }
    std::int64_t integer(const nlohmann::json& o, const char* key, bool allowNegative = false) const {
        const auto& v = field(o, key);
        if (!v.is_number_integer() || (!allowNegative && v.get<std::int64_t>() < 0))
            throw fail(std::string(key) + " must be an integer");
        return v.get<std::int64_t>();
    }
    std::string text(const nlohmann::json& o, const char* key) const {
        const auto& v = field(o, key);
        if (!v.is_string()) throw fail(std::string(key) + " must be a string");
        return v.get<std::string>();
    }
    bool boolean(const nlohmann::json& o, const char* key) const {
        const auto& v = field(o, key);
        if (!v.is_boolean()) throw fail(std::string(key) + " must be true or false");
        return v.get<bool>();
    }
    std::uint64_t hex(const nlohmann::json& o, const char* key) const {
        const std::string s = text(o, key);
        if (s.size() != 16) throw fail(std::string(key) + " must be 16 hex digits");
        std::uint64_t value = 0;
        for (const char c : s) {
            const int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            if (digit < 0) throw fail(std::string(key) + " must be 16 hex digits");
            value = (value << 4) | static_cast<std::uint64_t>(digit);
        }
        return value;
    }
    Error fail(const std::string& what) const { return Error(where_ + ": " + what); }

private:
    std::string where_;
};

}  // namespace

std::optional<FileStamp> stampFile(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return FileStamp{static_cast<std::uint64_t>(st.st_size),
                     static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

const VerifiedFile* VerificationRecord::find(const std::string& name) const {
    for (const auto& f : files)
        if (f.name == name) return &f;
    return nullptr;
}

std::string recordToJson(const VerificationRecord& r) {
    nlohmann::ordered_json j;
    j["format"] = kRecordFormat;
    j["format_version"] = kRecordVersion;
    j["result"] = r.intact ? "intact" : "damaged";
    j["verified_at"] = r.verifiedAt;
    j["method"] = methodName(r.method);
    j["program"] = r.program;
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const auto& f : r.files) {
        nlohmann::ordered_json entry = {{"file", f.name},         {"bytes", f.stamp.bytes}, {"mtime_ns", f.stamp.mtimeNs},
                                        {"checksum", checksumText(f.checksum)}, {"intact", f.intact}};
        if (!f.intact) entry["problem"] = f.problem;
        nlohmann::ordered_json samples = nlohmann::ordered_json::array();
        for (const auto& s : f.samples) samples.push_back({{"offset", s.offset}, {"bytes", s.bytes}, {"hash", checksumText(s.hash)}});
        entry["samples"] = samples;
        files.push_back(entry);
    }
    j["files"] = files;
    return j.dump(2) + "\n";
}

VerificationRecord recordFromJson(const std::string& text, const std::string& where) {
    const Reader r(where);
    nlohmann::json j;
    try {
        j = parseJson<nlohmann::json>(text, where);
    } catch (const nlohmann::json::exception& e) {
        throw r.fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j.is_object() || r.text(j, "format") != kRecordFormat) throw r.fail("not a Tandem verification record");
    if (r.integer(j, "format_version") != kRecordVersion) throw r.fail("written by another version of Tandem");
    VerificationRecord rec;
    const std::string result = r.text(j, "result");
    if (result != "intact" && result != "damaged") throw r.fail("result must be intact or damaged");
    rec.intact = result == "intact";
    rec.verifiedAt = r.text(j, "verified_at");
    const std::string method = r.text(j, "method");
    if (method != methodName(VerifiedBy::Conversion) && method != methodName(VerifiedBy::FullRead))
        throw r.fail("method must be conversion or full-read");
    rec.method = method == methodName(VerifiedBy::Conversion) ? VerifiedBy::Conversion : VerifiedBy::FullRead;
    rec.program = r.text(j, "program");
    const auto& files = r.field(j, "files");
    if (!files.is_array()) throw r.fail("files must be an array");
    for (const auto& f : files) {
        if (!f.is_object()) throw r.fail("each of files must be an object");
        VerifiedFile v;
        v.name = r.text(f, "file");
        v.stamp.bytes = static_cast<std::uint64_t>(r.integer(f, "bytes"));
        v.stamp.mtimeNs = r.integer(f, "mtime_ns", true);
        v.checksum = r.hex(f, "checksum");
        v.intact = r.boolean(f, "intact");
        if (!v.intact) v.problem = r.text(f, "problem");
        const auto& samples = r.field(f, "samples");
        if (!samples.is_array()) throw r.fail("samples must be an array");
        for (const auto& s : samples) {
            if (!s.is_object()) throw r.fail("each sample must be an object");
            if (v.samples.size() == kMaxSamplesPerFile) throw r.fail("a file has more samples than Tandem takes");
            v.samples.push_back({static_cast<std::uint64_t>(r.integer(s, "offset")),
                                 static_cast<std::uint64_t>(r.integer(s, "bytes")), r.hex(s, "hash")});
            if (v.samples.back().bytes > kSampleWindowBytes) throw r.fail("a sample is larger than a window");
        }
        rec.files.push_back(std::move(v));
    }
    return rec;
}

std::optional<VerificationRecord> readRecord(const fs::path& dir) {
    const fs::path path = dir / kStoreRecordName;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
    return recordFromJson(readRegularFile(path), path.string());
}

void writeRecord(const fs::path& dir, const VerificationRecord& record) {
    writeFileAtomically(dir / kStoreRecordName, recordToJson(record));
}

std::vector<StoreFile> checkedFiles(const StoreManifest& m) {
    std::vector<StoreFile> files;
    if (m.dense) files.push_back(*m.dense);
    for (const int layer : m.moeLayers)
        if (const StoreLayer* l = m.findLayer(layer)) files.push_back(l->file);
    return files;
}

std::vector<SampleWindow> sampleWindows(const StoreFile& f, std::size_t files) {
    if (f.bytes == 0) return {};
    const std::uint64_t window = std::min(kSampleWindowBytes, f.bytes);
    const std::uint64_t share = kSampleBudgetBytes / (kSampleWindowBytes * std::max<std::size_t>(files, 1));
    const std::uint64_t perFile = std::clamp<std::uint64_t>(share, kMinSamplesPerFile, kMaxSamplesPerFile);
    const std::uint64_t count = std::min(perFile, (f.bytes + window - 1) / window);
    Fingerprint seed;
    seed.add(f.name);
    seed.add(f.bytes);
    seed.add(f.checksum);
    std::uint64_t state = seed.value();
    std::vector<SampleWindow> windows;
    for (std::uint64_t s = 0; s < count; ++s) {
        // One window in each of `count` equal stretches of the file, at a random page in it.
        const std::uint64_t lo = f.bytes / count * s, hi = s + 1 == count ? f.bytes : f.bytes / count * (s + 1);
        const std::uint64_t room = hi > lo + window ? hi - lo - window : 0;
        std::uint64_t offset = (lo + splitmix(state) % (room + 1)) / 4096 * 4096;
        offset = std::min(std::max(offset, lo / 4096 * 4096), f.bytes - window);
        if (windows.empty() || windows.back().offset != offset) windows.push_back({offset, window});
    }
    return windows;
}

std::string utcNow() {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm {};
    gmtime_r(&now, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

std::string damageAdvice(const fs::path& dir, const StoreManifest& m) {
    return "Nothing was deleted. Convert the model again (tandem-cli convert --model " + m.sourcePath + " --out " +
           dir.string() + " --experts " + std::string(io::expertTypeName(m.expertType)) +
           ", or Get a Model in the app) or download it again; tandem-cli convert --out " + dir.string() +
           " --verify reads the store again";
}

VerificationStatus checkVerification(const fs::path& dir, const StoreManifest& manifest) {
    using State = VerificationState;
    std::optional<VerificationRecord> record;
    try {
        record = readRecord(dir);
    } catch (const std::exception& e) {
        return {State::Unverified, std::string("its verification record cannot be used (") + e.what() + ")"};
    }
    if (!record) return {State::Unverified, dir.string() + " has not been verified yet"};

    const auto files = checkedFiles(manifest);
    std::vector<const VerifiedFile*> verified;
    for (const auto& f : files) {
        const VerifiedFile* v = record->find(f.name);
        if (!v) return {State::Unverified, f.name + " is not in its verification record"};
        const auto stamp = stampFile(dir / f.name);
        if (!stamp || !(*stamp == v->stamp))
            return {State::Unverified, (dir / f.name).string() + " changed (size or modification time) since it was verified on " +
                                           when(*record)};
        if (v->intact && v->checksum != f.checksum)
            return {State::Unverified, "its verification record is of another conversion (" + f.name + ")"};
        verified.push_back(v);
    }
    if (!record->intact) {
        std::string what;
        for (const auto* v : verified)
            if (!v->intact) what += (what.empty() ? "" : "; ") + (dir / v->name).string() + ": " + v->problem;
        if (what.empty()) what = "a file of the store did not match its checksum";
        return {State::Damaged, dir.string() + " is damaged (found on " + when(*record) + "): " + what + ". " + damageAdvice(dir, manifest)};
    }
    // The sampled windows: milliseconds from the page cache, a few dozen small reads from a disk.
    for (const auto* v : verified) {
        const InputFile in(dir / v->name);
        if (!in.ok()) return {State::Unverified, (dir / v->name).string() + ": " + in.error()};
        std::vector<std::byte> buffer(kSampleWindowBytes);
        for (const auto& s : v->samples) {
            std::uint64_t h = 0;
            const std::string problem = in.hash(s.offset, s.bytes, buffer, h);
            if (!problem.empty()) return {State::Unverified, (dir / v->name).string() + ": " + problem};
            if (h != s.hash)
                return {State::Unverified, "the bytes of " + (dir / v->name).string() + " at " + std::to_string(s.offset) +
                                               " are not those verified on " + when(*record) +
                                               ", though its size and modification time did not change"};
        }
    }
    return {State::Verified, "verified on " + when(*record)};
}

VerifyResult verifyStoreFiles(const fs::path& dir, const StoreManifest& manifest, const VerifyOptions& options) {
    const std::vector<StoreFile> files = checkedFiles(manifest);
    struct FileState {
        std::unique_ptr<InputFile> in;
        std::vector<std::uint64_t> pieces;
        std::string problem;  // set once, by the first failure
        std::mutex mutex;
    };
    std::vector<FileState> state(files.size());
    struct Piece {
        std::size_t file, index;
    };
    std::vector<Piece> work;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const StoreFile& f = files[i];
        auto& s = state[i];
        s.in = std::make_unique<InputFile>(dir / f.name);
        if (!s.in->ok()) {
            s.problem = s.in->error();
            continue;
        }
        if (s.in->stamp().bytes != f.bytes) {
            s.problem = "it holds " + std::to_string(s.in->stamp().bytes) + " bytes where the manifest says " + std::to_string(f.bytes);
            continue;
        }
        const std::size_t count = static_cast<std::size_t>((f.bytes + f.pieceBytes - 1) / f.pieceBytes);
        s.pieces.assign(count, 0);
        for (std::size_t p = 0; p < count; ++p) work.push_back({i, p});
        total += f.bytes;
    }

    VerifyResult result;
    if (options.progress && !options.progress(0.0)) {
        result.cancelled = true;
        return result;
    }
    std::atomic<std::size_t> next{0};
    std::atomic<std::uint64_t> done{0};
    std::atomic<bool> stop{false};
    std::atomic<int> running{0};
    std::mutex finishedMutex;
    std::condition_variable finished;
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = std::max(1, std::min<int>(options.threads > 0 ? options.threads : std::min(hardware, 8),
                                                  static_cast<int>(std::max<std::size_t>(work.size(), 1))));
    std::vector<std::thread> workers;
    bool outOfMemory = false;  // under finishedMutex
    const auto read = [&] {
        if (options.lowPriority) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
        std::vector<std::byte> buffer;
        try {
            buffer.resize(kReadChunk);
        } catch (const std::bad_alloc&) {
            const std::lock_guard lock(finishedMutex);
            outOfMemory = true;
            if (--running == 0) finished.notify_all();
            return;
        }
        while (!stop.load(std::memory_order_relaxed)) {
            const std::size_t i = next.fetch_add(1);
            if (i >= work.size()) break;
            const Piece& p = work[i];
            const StoreFile& f = files[p.file];
            auto& s = state[p.file];
            const std::uint64_t offset = p.index * f.pieceBytes;
            const std::uint64_t bytes = std::min<std::uint64_t>(f.pieceBytes, f.bytes - offset);
            std::uint64_t h = 0;
            const std::string problem = s.in->hash(offset, bytes, buffer, h, &done, &stop);
            if (!problem.empty()) {
                const std::lock_guard lock(s.mutex);
                if (s.problem.empty()) s.problem = problem;
            }
            s.pieces[p.index] = h;
        }
        const std::lock_guard lock(finishedMutex);
        if (--running == 0) finished.notify_all();
    };
    // Fewer threads than asked for when the system has no more to give; none is an error.
    for (int t = 0; t < threads; ++t) {
        ++running;
        try {
            workers.emplace_back(read);
        } catch (const std::system_error&) {
            --running;
            break;
        }
    }
    if (workers.empty()) throw Error("cannot start a thread to read " + dir.string() + "; the system has no threads to spare");
    {
        std::unique_lock lock(finishedMutex);
        while (running > 0) {
            finished.wait_for(lock, std::chrono::milliseconds(100));
            if (options.progress && running > 0 && !stop) {
                lock.unlock();
                const bool more = options.progress(total ? static_cast<double>(done.load()) / static_cast<double>(total) : 0.0);
                lock.lock();
                if (!more) stop = true;
            }
        }
    }
    for (auto& w : workers) w.join();
    if (outOfMemory && next.load() < work.size() && !stop)
        throw Error("out of memory while reading " + dir.string() + " to verify it; close other programs and try again");

    if (stop) {
        result.cancelled = true;
        return result;
    }
    VerificationRecord& record = result.record;
    record.method = VerifiedBy::FullRead;
    record.program = options.program;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const StoreFile& f = files[i];
        auto& s = state[i];
        VerifiedFile v;
        v.name = f.name;
        if (s.in->ok()) v.stamp = s.in->stamp();
        if (s.problem.empty()) {
            v.checksum = foldPieceHashes(s.pieces);
            if (v.checksum != f.checksum)
                s.problem = "its checksum is " + checksumText(v.checksum) + ", the manifest says " + checksumText(f.checksum) +
                            " (its bytes changed since the conversion)";
        }
        if (s.problem.empty()) v.samples = s.in->hashSamples(sampleWindows(f, files.size()), s.problem);
        v.intact = s.problem.empty();
        v.problem = s.problem;
        if (!v.intact) result.damage.push_back((dir / f.name).string() + ": " + s.problem);
        record.files.push_back(std::move(v));
    }
    record.intact = result.damage.empty();
    record.verifiedAt = utcNow();
    if (options.progress) options.progress(1.0);
    if (!options.writeRecord) return result;
    try {
        writeRecord(dir, record);
    } catch (const std::exception& e) {
        result.recordProblem = std::string("the result could not be recorded, so the store will be verified again next time: ") + e.what();
    }
    return result;
}

VerificationRecord recordConversion(const fs::path& dir, const StoreManifest& manifest, const std::string& program) {
    const auto files = checkedFiles(manifest);
    VerificationRecord record;
    record.intact = true;
    record.method = VerifiedBy::Conversion;
    record.program = program;
    for (const auto& f : files) {
        const InputFile in(dir / f.name);
        if (!in.ok()) throw Error((dir / f.name).string() + ": " + in.error());
        VerifiedFile v;
        v.name = f.name;
        v.stamp = in.stamp();
        v.checksum = f.checksum;
        v.intact = true;
        std::string problem;
        v.samples = in.hashSamples(sampleWindows(f, files.size()), problem);
        if (!problem.empty()) throw Error((dir / f.name).string() + ": " + problem);
        record.files.push_back(std::move(v));
    }
    record.verifiedAt = utcNow();
    return record;
}

}  // namespace tandem::io
