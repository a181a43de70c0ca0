#pragma once
// Whether a packed model store (tandem-cli convert) still holds the bytes it was converted with.
//
// A store is read in full once -- by its conversion, or by verifyStore -- and the result is recorded in
// STORE/tandem-verified.json. checkStore compares that record with the store as it is now (each file's
// size and modification time, and a few MiB of sampled windows): milliseconds. Engine::load does the same
// check and reports it in ModelInfo::store; a store whose record says it is damaged does not load.
//
//   if (tandem::checkStore(dir).state == tandem::StoreState::Unverified)
//       tandem::verifyStore(dir, [](double done) { ...; return !cancelled; });
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tandem/engine.h"

namespace tandem {

struct StoreCheck {
    StoreState state = StoreState::NotAStore;
    // Verified: when. Unverified: why (never verified, a file changed, the check was cancelled).
    // Damaged: which files, and what to do (convert or download again; nothing is deleted).
    std::string message;
    std::vector<std::string> damage;  // verifyStore, Damaged: one line per damaged file, naming it
    std::string advice;               // verifyStore, Damaged: what to do (the end of message)
    std::uint64_t bytes = 0;    // what a full verification reads
    // verifyStore only: why the result could not be written into the store folder (read-only, full):
    // it holds for now, and the store counts as unverified again at the next load.
    std::string recordProblem;
};

// Milliseconds. NotAStore for a folder without a store manifest. Throws tandem::Error, naming the file
// and what to do, for a store that cannot be opened at all (unfinished, a file missing or truncated).
StoreCheck checkStore(const std::filesystem::path& dir);

struct VerifyStoreOptions {
    int threads = 0;          // reading threads; <= 0: one per hardware thread, at most 8
    bool background = false;  // low-priority threads, for verifying while the model is in use
};

// Reads every byte of the store against its manifest's checksums and records the result (also when it
// finds damage). progress(fraction done) is called about ten times a second from the calling thread;
// returning false stops the verification: the result is then Unverified and nothing is recorded.
// Verified or Damaged otherwise. Throws tandem::Error as checkStore does.
StoreCheck verifyStore(const std::filesystem::path& dir, const std::function<bool(double)>& progress = {},
                       const VerifyStoreOptions& options = {});

}  // namespace tandem
