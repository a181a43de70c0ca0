#include "convert/convert_model.h"

#include "convert/convert_dense.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>

#include "cpu/int4_repack.h"
#include "cpu/pool/thread_pool.h"
#include "tandem/byte_size.h"
#include "io/compressed_tensors.h"
#include "io/mapped_file.h"
#include "io/output_file.h"
#include "io/store_checksum.h"
#include "io/store_verification.h"
#include "convert/convert_dense.h"
#include "convert/convert_output.h"
#include "convert/convert_plan.h"
#include "tandem/error.h"

namespace tandem::convert {

namespace fs = std::filesystem;

namespace {

// model.safetensors is written and checked in pieces of this size: large enough for sequential I/O,
// small enough to stay out of the way in memory.
constexpr std::size_t kDensePieceBytes = std::size_t{64} << 20;
// Room for the manifest and its temporary copy in the free-space check.
constexpr std::uint64_t kManifestBytes = std::uint64_t{1} << 20;

struct FreeAligned {
    void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], FreeAligned>;

AlignedBytes allocatePages(std::size_t bytes) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(io::kExpertAlignment, bytes));
    if (!p) throw std::bad_alloc();
    return AlignedBytes(p);
}

// The size, checksum and first-page hash of a finished store file.
io::StoreFile describeFile(const fs::path& path, std::uint64_t checksum, std::uint64_t pieceBytes) {
    const io::MappedFile file(path);
    const auto bytes = file.bytes();
    return {path.filename().string(), bytes.size(), checksum, pieceBytes,
            io::hashBytes(bytes.first(std::min<std::size_t>(bytes.size(), io::kStoreHeadBytes)))};
}

void releaseSource(const cpu::WeightMatrix& m) {
    const std::size_t rowBytes = io::dtypeRowBytes(m.dtype, m.cols);
    io::releaseMappedPages({m.data + static_cast<std::size_t>(m.firstRow) * rowBytes, static_cast<std::size_t>(m.rows) * rowBytes});
    if (m.int4Scales) {  // compressed-tensors int4: the group scales lie in a tensor of their own
        const std::size_t groups = static_cast<std::size_t>(m.cols / io::kPackedInt4Group);
        io::releaseMappedPages({reinterpret_cast<const std::byte*>(m.int4Scales + static_cast<std::size_t>(m.firstRow) * groups),
                                static_cast<std::size_t>(m.rows) * groups * sizeof(std::uint16_t)});
    }
}

// The nearest folder at or above p that exists: where the store's bytes will land.
fs::path existingAncestor(fs::path p) {
    while (!fs::exists(p) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
    return p;
}

class Converter {
public:
    Converter(const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& onProgress)
        : options_(options), onProgress_(onProgress), pool_(options.threads) {}

    ConvertResult run();

private:
    // A file an interrupted run finished, judged by its size alone; its checksum is checked when reached.
    bool looksFinished(const std::optional<io::StoreFile>& file) const {
        std::error_code ec;
        return file && fs::file_size(output_.partial / file->name, ec) == file->bytes && !ec;
    }
    bool stillIntact(const io::StoreFile& file);
    void checkFreeSpace(std::uint64_t needed) const;
    void copySideFiles();
    void writeDense(const io::SafetensorsPlan& dense);
    io::StoreFile packLayer(int layer);
    void forgetLayer(int layer);
    void report();
    void recordVerification();

    const ConvertOptions& options_;
    const std::function<void(const ConvertProgress&)>& onProgress_;
    cpu::ThreadPool pool_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    ConversionPlan plan_;
    OutputFolder output_;
    io::StoreManifest manifest_;
    ConvertProgress progress_;
    ConvertResult result_;
};

ConvertResult Converter::run() {
    if (options_.model.empty() || options_.out.empty())
        throw Error("convert needs a model (folder or .gguf file) and an output folder");
    plan_ = planConversion(options_.model, options_.experts);
    storeDenseAs(plan_, options_.dense);
    const io::StoreManifest wanted = plan_.emptyManifest();
    output_ = inspectOutput(options_.out, wanted);
    result_.store = output_.out;
    progress_.layers = static_cast<int>(plan_.moeLayers.size());
    if (output_.upToDate) {
        result_.upToDate = true;
        progress_.layer = progress_.resumedLayers = result_.resumedLayers = progress_.layers;
        report();
        return result_;
    }

    const io::SafetensorsPlan dense = io::planSafetensors(
        plan_.denseTensors, {{"format", "pt"}, {"tandem", "the non-expert tensors of a Tandem packed store"}});
    std::optional<io::StoreFile> resumedDense;
    if (output_.resume) resumedDense = output_.resume->dense;
    std::uint64_t needed = looksFinished(resumedDense) ? 0 : dense.fileBytes;
    for (const int layer : plan_.moeLayers) {
        std::optional<io::StoreFile> file;
        if (output_.resume)
            if (const auto* l = output_.resume->findLayer(layer)) file = l->file;
        if (!looksFinished(file)) needed += plan_.layerBytes();
    }
    progress_.bytesTotal = needed;
    for (const auto& file : plan_.sideFiles) needed += file.text ? file.text->size() : fs::file_size(plan_.source / file.name);
    checkFreeSpace(needed + kManifestBytes);

    manifest_ = startOutput(output_, wanted);
    report();
    copySideFiles();
    if (looksFinished(manifest_.dense) && stillIntact(*manifest_.dense)) {
        result_.denseResumed = true;
    } else {
        if (looksFinished(manifest_.dense)) progress_.bytesTotal += dense.fileBytes;  // damaged after all
        writeDense(dense);
    }

    for (const int layer : plan_.moeLayers) {
        const io::StoreLayer* kept = manifest_.findLayer(layer);
        if (kept && looksFinished(kept->file) && stillIntact(kept->file)) {
            ++progress_.resumedLayers;
        } else {
            if (kept && looksFinished(kept->file)) progress_.bytesTotal += plan_.layerBytes();  // damaged after all
            forgetLayer(layer);
            const io::StoreFile file = packLayer(layer);
            manifest_.layers.push_back({layer, file});
            io::writeManifest(output_.partial, manifest_);
            ++result_.packedLayers;
        }
        ++progress_.layer;
        report();
    }
    manifest_.complete = true;
    io::writeManifest(output_.partial, manifest_);
    finishOutput(output_);
    recordVerification();
    result_.resumedLayers = progress_.resumedLayers;
    result_.bytesWritten = progress_.bytesWritten;
    result_.seconds = progress_.seconds;
    return result_;
}

bool Converter::stillIntact(const io::StoreFile& file) {
    const io::MappedFile mapped(output_.partial / file.name);
    return io::checksumInPieces(mapped.bytes(), file.pieceBytes, pool_.asParallelFor()) == file.checksum;
}

void Converter::checkFreeSpace(std::uint64_t needed) const {
    const fs::path where = existingAncestor(output_.partial);
    const std::uint64_t available = io::freeBytes(where);
    if (needed > available)
        throw Error("not enough disk space for the store: converting " + plan_.source.string() + " needs " +
                    tandem::formatBytes(needed) + " more in " + where.string() + ", which has " + tandem::formatBytes(available) +
                    " free; free some space or choose an --out folder on another disk");
}

void Converter::copySideFiles() {
    for (const auto& file : plan_.sideFiles) {
        const fs::path to = output_.partial / file.name;
        if (file.text) {
            std::ofstream out(to, std::ios::binary | std::ios::trunc);
            out << *file.text;
            out.close();
            if (!out) throw io::OutputError("cannot write " + to.string() + "; is the disk full?");
            continue;
        }
        std::error_code ec;
        fs::copy_file(plan_.source / file.name, to, fs::copy_options::overwrite_existing, ec);
        if (ec) throw io::OutputError("cannot copy " + (plan_.source / file.name).string() + " into the store: " + ec.message());
    }
}

void Converter::writeDense(const io::SafetensorsPlan& dense) {
    manifest_.dense.reset();
    io::writeManifest(output_.partial, manifest_);
    const fs::path path = output_.partial / io::kStoreDenseName;
    const std::uint64_t before = progress_.bytesWritten;
    const std::uint64_t checksum = io::writeSafetensors(dense, path, kDensePieceBytes, [&](std::uint64_t done) {
        progress_.bytesWritten = before + done;
        report();
    });
    for (const auto& t : plan_.denseTensors) io::releaseMappedPages(t.data);
    manifest_.dense = describeFile(path, checksum, kDensePieceBytes);
    io::writeManifest(output_.partial, manifest_);
}

void Converter::forgetLayer(int layer) {
    const auto it = std::find_if(manifest_.layers.begin(), manifest_.layers.end(),
                                 [&](const io::StoreLayer& l) { return l.layer == layer; });
    if (it == manifest_.layers.end()) return;
    manifest_.layers.erase(it);
    io::writeManifest(output_.partial, manifest_);
}

io::StoreFile Converter::packLayer(int layer) {
    const auto& experts = plan_.weights.layers[static_cast<std::size_t>(layer)].moe->experts;
    const io::ExpertLayout& layout = plan_.layout;
    const std::size_t stride = layout.expertBytes;
    const std::size_t count = experts.size();
    const std::size_t batch = std::min<std::size_t>(count, static_cast<std::size_t>(pool_.size()));
    const fs::path path = output_.partial / io::layerFileName(layer);
    io::OutputFile file(path);
    // Two buffers: the pool packs a batch into one while the previous batch is written from the other.
    AlignedBytes buffers[2] = {allocatePages(batch * stride), allocatePages(batch * stride)};
    std::vector<std::uint64_t> hashes(count);
    std::future<void> writing;
    std::size_t pendingBytes = 0;
    auto finishWrite = [&] {
        if (!writing.valid()) return;
        writing.get();
        progress_.bytesWritten += pendingBytes;
        report();
    };

    for (std::size_t first = 0, round = 0; first < count; first += batch, ++round) {
        const std::size_t n = std::min(batch, count - first);
        std::byte* buffer = buffers[round % 2].get();
        try {
            pool_.parallelFor(n, 1, [&](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) {
                    const std::size_t e = first + i;
                    std::byte* dst = buffer + i * stride;
                    try {
                        cpu::packCheckpointExpert(layout, experts[e].gate, experts[e].up, experts[e].down, dst);
                    } catch (const Error& error) {
                        throw Error(plan_.source.string() + ": layer " + std::to_string(layer) + ", expert " +
                                    std::to_string(e) + ": " + error.what());
                    }
                    hashes[e] = io::hashBytes({dst, stride});
                    for (const auto* m : {&experts[e].gate, &experts[e].up, &experts[e].down}) releaseSource(*m);
                }
            });
        } catch (const Error& error) {
            if (writing.valid()) writing.wait();
            discardOutput(output_);
            throw Error(std::string(error.what()) + ". Removed the unfinished store " + output_.partial.string() +
                        "; download the model again");
        }
        finishWrite();
        pendingBytes = n * stride;
        writing = std::async(std::launch::async, [&file, buffer, first, n, stride] {
            file.writeAt(first * stride, {buffer, n * stride});
        });
    }
    finishWrite();
    file.syncAndDropCache();
    return describeFile(path, io::foldPieceHashes(hashes), stride);
}

// The finished store counts as verified: every checksum in the manifest was taken from the bytes as they
// were written (a file kept from an interrupted run was read back in full). Only the sampled windows
// are read, a few MiB. Not being able to record it costs a full read before the first use, no more.
void Converter::recordVerification() {
    try {
        io::writeRecord(output_.out, io::recordConversion(output_.out, manifest_, manifest_.converter));
    } catch (const std::exception& e) {
        result_.recordProblem = std::string("the store is converted, but its verification record could not be written (") +
                                e.what() + "); it will be read in full before its first use";
    }
}

void Converter::report() {
    progress_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (onProgress_) onProgress_(progress_);
}

}  // namespace

ConvertResult convertModel(const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& onProgress) {
    return Converter(options, onProgress).run();
}

}  // namespace tandem::convert
