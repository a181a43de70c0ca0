// tandem::checkStore and tandem::verifyStore: the public face of io/store_verification.h.
#include "tandem/store_check.h"

#include "io/packed_store.h"
#include "io/store_verification.h"

#ifndef TANDEM_VERSION
#error "TANDEM_VERSION must name the version written into verification records"
#endif

namespace tandem {

namespace {

StoreState stateOf(io::VerificationState s) {
    switch (s) {
    case io::VerificationState::Verified: return StoreState::Verified;
    case io::VerificationState::Damaged: return StoreState::Damaged;
    case io::VerificationState::Unverified: break;
    }
    return StoreState::Unverified;
}

std::uint64_t checkedBytes(const io::StoreManifest& manifest) {
    std::uint64_t bytes = 0;
    for (const auto& f : io::checkedFiles(manifest)) bytes += f.bytes;
    return bytes;
}

}  // namespace

StoreCheck checkStore(const std::filesystem::path& dir) {
    if (!io::PackedStore::isStore(dir)) return {};
    const io::PackedStore store(dir);
    StoreCheck check;
    check.state = stateOf(store.verification().state);
    check.message = store.verification().message;
    check.bytes = checkedBytes(store.manifest());
    return check;
}

StoreCheck verifyStore(const std::filesystem::path& dir, const std::function<bool(double)>& progress,
                       const VerifyStoreOptions& options) {
    if (!io::PackedStore::isStore(dir)) return {};
    const io::StoreManifest manifest = io::PackedStore(dir).manifest();  // refuses what cannot be opened
    io::VerifyOptions o;
    o.threads = options.threads;
    o.lowPriority = options.background;
    o.progress = progress;
    o.program = std::string("tandem ") + TANDEM_VERSION;
    const io::VerifyResult result = io::verifyStoreFiles(dir, manifest, o);

    StoreCheck check;
    check.bytes = checkedBytes(manifest);
    check.recordProblem = result.recordProblem;
    if (result.cancelled) {
        check.state = StoreState::Unverified;
        check.message = "the verification of " + dir.string() + " was stopped before the end";
    } else if (!result.damage.empty()) {
        check.state = StoreState::Damaged;
        check.damage = result.damage;
        std::string what;
        for (const auto& line : result.damage) what += (what.empty() ? "" : "; ") + line;
        check.advice = io::damageAdvice(dir, manifest);
        check.message = dir.string() + " is damaged: " + what + ". " + check.advice;
    } else {
        check.state = StoreState::Verified;
        check.message = "verified on " + result.record.verifiedAt + " (by a full read)";
    }
    return check;
}

}  // namespace tandem
