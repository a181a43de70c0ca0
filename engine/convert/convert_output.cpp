#include "convert/convert_output.h"

#include "io/output_file.h"
#include "io/packed_store.h"
#include "tandem/error.h"

namespace tandem::convert {

namespace fs = std::filesystem;

namespace {

bool isEmptyFolder(const fs::path& p) { return fs::is_directory(p) && fs::is_empty(p); }

fs::path withSuffix(const fs::path& p, const char* suffix) {
    fs::path s = p;
    s += suffix;
    return s;
}

// A store in `dir` that describes `wanted`, whatever its state; nullopt for another conversion or an
// unreadable manifest.
std::optional<io::StoreManifest> sameConversion(const fs::path& dir, const io::StoreManifest& wanted) {
    try {
        auto m = io::readManifest(dir);
        if (m.sameConversion(wanted)) return m;
    } catch (const Error&) {
    }
    return std::nullopt;
}

}  // namespace

OutputFolder inspectOutput(const fs::path& outArg, const io::StoreManifest& wanted) {
    OutputFolder o;
    o.out = fs::absolute(outArg).lexically_normal();
    if (o.out.filename().empty()) o.out = o.out.parent_path();  // "store/" names the folder "store"
    o.partial = withSuffix(o.out, ".partial");

    if (fs::exists(o.out)) {
        if (io::PackedStore::isStore(o.out)) {
            o.existing = OutputFolder::Existing::Store;
            if (sameConversion(o.out, wanted)) {
                try {
                    const io::PackedStore check(o.out);
                    // A store its verification found damaged is converted again and replaced.
                    o.upToDate = check.verification().state != io::VerificationState::Damaged;
                } catch (const Error&) {  // damaged: convert again and replace it
                }
            }
        } else if (isEmptyFolder(o.out)) {
            o.existing = OutputFolder::Existing::EmptyFolder;
        } else {
            throw Error(o.out.string() + " already exists and is not a Tandem store; convert never overwrites other "
                                         "files, so choose a new --out folder or remove it");
        }
    }
    if (!o.upToDate && fs::exists(o.partial)) {
        if (io::PackedStore::isStore(o.partial))
            o.resume = sameConversion(o.partial, wanted);
        else if (!isEmptyFolder(o.partial))
            throw Error(o.partial.string() + " already exists and is not an unfinished Tandem conversion; remove it or "
                                             "choose another --out folder");
    }
    return o;
}

io::StoreManifest startOutput(const OutputFolder& o, const io::StoreManifest& wanted) {
    if (o.resume) return *o.resume;
    if (io::PackedStore::isStore(o.partial)) fs::remove_all(o.partial);  // a stale conversion of something else
    std::error_code ec;
    fs::create_directories(o.partial, ec);
    if (ec) throw io::OutputError("cannot create " + o.partial.string() + ": " + ec.message());
    io::writeManifest(o.partial, wanted);
    return wanted;
}

void finishOutput(const OutputFolder& o) {
    std::error_code ec;
    const fs::path replaced = withSuffix(o.out, ".replaced");
    if (o.existing == OutputFolder::Existing::EmptyFolder) fs::remove(o.out, ec);
    if (o.existing == OutputFolder::Existing::Store) {
        if (io::PackedStore::isStore(replaced)) fs::remove_all(replaced, ec);
        fs::rename(o.out, replaced, ec);
        if (ec) throw io::OutputError("cannot move the old store " + o.out.string() + " aside: " + ec.message());
    }
    fs::rename(o.partial, o.out, ec);
    if (ec)
        throw io::OutputError("cannot rename the finished " + o.partial.string() + " to " + o.out.string() + ": " +
                              ec.message());
    io::syncDirectory(o.out.parent_path());
    // Also what a run interrupted between the two renames left.
    if (io::PackedStore::isStore(replaced)) fs::remove_all(replaced, ec);
}

void discardOutput(const OutputFolder& o) {
    std::error_code ec;
    fs::remove_all(o.partial, ec);
}

}  // namespace tandem::convert
