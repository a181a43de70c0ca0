#pragma once
// `tandem-cli convert`: a Hugging Face MoE checkpoint (bf16, or DeepSeek FP8) into a packed model store
// (io/packed_store.h) whose routed experts the CPU kernels read straight from the mapped files.
//
// Memory stays bounded whatever the model's size: the input is read through its memory mapping, one
// layer at a time, and the experts of a layer are packed in batches of one per thread into two
// buffers, one being written while the other is packed (2 x threads x one packed expert: DeepSeek-V3
// in int4 with 16 threads, 0.8 GB). The output goes to OUT.partial and is renamed to OUT at the end
// (convert/convert_output.h); after every file the manifest records it with its checksum, so running
// the same command after an interruption (Ctrl-C, a crash, a full disk) keeps each finished file whose
// checksum still matches and redoes the rest. A damaged input fails before anything is written when
// its headers or shapes are wrong, and removes OUT.partial when a weight turns out to be NaN or infinite
// mid-way: files packed from a damaged input are not worth resuming.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "io/expert_layout.h"

namespace tandem::convert {

struct ConvertOptions {
    std::filesystem::path model, out;
    io::ExpertType experts = io::ExpertType::BF16;
    int threads = 0;  // <= 0: one per hardware thread
    std::string dense = "checkpoint";  // the dense products: checkpoint, int8 or bf16 (convert/convert_dense.h)
};

struct ConvertProgress {
    int layer = 0, layers = 0;   // MoE layers finished (packed, or kept from an interrupted run) of all
    int resumedLayers = 0;       // of those, kept from an interrupted run
    std::uint64_t bytesWritten = 0, bytesTotal = 0;  // by this run: what it keeps is not counted
    double seconds = 0;
};

struct ConvertResult {
    bool upToDate = false;  // OUT already held this conversion; nothing was done
    int packedLayers = 0, resumedLayers = 0;
    bool denseResumed = false;
    std::uint64_t bytesWritten = 0;
    double seconds = 0;
    std::filesystem::path store;
    // A finished conversion writes STORE/tandem-verified.json (io/store_verification.h) from the
    // checksums it took while writing; why it could not, if so.
    std::string recordProblem;
};

// Throws tandem::Error for a bad input or output (nothing of the input's is left behind), and
// io::OutputError when writing fails (OUT.partial stays, to resume). onProgress is called from the
// calling thread after every batch of experts; an exception it throws interrupts the conversion like
// Ctrl-C would (OUT.partial stays).
ConvertResult convertModel(const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& onProgress);

}  // namespace tandem::convert
