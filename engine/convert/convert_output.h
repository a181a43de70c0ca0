#pragma once
// Where a conversion writes. The store is built in OUT.partial beside OUT and renamed to OUT only when
// every file is written and synced, so OUT is never a half-written store: it is absent, the old store,
// or the new one. OUT.partial keeps what an interrupted run finished; a later run of the same
// conversion (same input, expert type and format) picks it up, any other conversion starts it afresh.
// Folders that are not Tandem stores are never overwritten or removed.
#include <filesystem>
#include <optional>

#include "io/store_manifest.h"

namespace tandem::convert {

struct OutputFolder {
    enum class Existing { Nothing, EmptyFolder, Store };

    std::filesystem::path out, partial;
    Existing existing = Existing::Nothing;
    bool upToDate = false;                   // OUT already holds this conversion, intact
    std::optional<io::StoreManifest> resume;  // OUT.partial's manifest, from an interrupted run of this conversion
};

// Looks at OUT and OUT.partial without changing anything. Throws tandem::Error when either exists and
// is not a Tandem store (or an empty folder).
OutputFolder inspectOutput(const std::filesystem::path& out, const io::StoreManifest& wanted);

// Creates OUT.partial (clearing a stale conversion's) and returns the manifest to continue from:
// the interrupted run's, or `wanted` with no files written yet.
io::StoreManifest startOutput(const OutputFolder& output, const io::StoreManifest& wanted);

// Replaces OUT by the finished OUT.partial.
void finishOutput(const OutputFolder& output);

// Removes OUT.partial, after the input turned out to be damaged: nothing in it can be trusted.
void discardOutput(const OutputFolder& output);

}  // namespace tandem::convert
