#pragma once
// Getting a model ready for Tandem, for the desktop app's model wizard: what a model will need (RAM,
// VRAM, disk) worked out from its config.json alone, before anything is downloaded, and the conversion
// of a downloaded checkpoint into a packed model store with progress and cancel.
//
//   const auto need = tandem::estimateFootprint("/models/Qwen3-30B-A3B", tandem::ExpertPrecision::INT4);
//   tandem::convertModel({"/models/Qwen3-30B-A3B", "/models/Qwen3-30B-A3B-int4", ExpertPrecision::INT4},
//                        [](const tandem::ConvertProgress& p) { ...; return !cancelled; });
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "tandem/engine.h"

namespace tandem {

// Bytes a model takes, per place. The routed experts live in RAM and are read by the CPU; everything
// else (attention, dense and shared MLPs, routers, embeddings) runs on the GPU in bf16.
struct Footprint {
    std::uint64_t totalParameters = 0;   // the model's own weights (DeepSeek-V3's MTP layers not counted)
    std::uint64_t activeParameters = 0;  // used per token: all but the routed experts, plus k of them
    std::uint64_t routedExpertBytes = 0; // the routed experts packed in the chosen type
    std::uint64_t denseBytes = 0;        // everything else, in bf16 (FP8 is widened on upload)
    std::uint64_t denseInt8Bytes = 0;    // the same with int8 dense weights (DensePrecision::Int8; embeddings,
                                         // norms and routers as they are)
    std::uint64_t kvCacheBytes = 0;      // one conversation's KV cache at the context length (float32)
    std::uint64_t kvCacheInt8Bytes = 0;  // the same in int8 with its scales (KvCacheType::Int8)
    std::uint64_t kvCacheLayerBytes = 0; // one layer's share of kvCacheBytes: a GPU engine's int8 cache keeps
                                         // that layer's rows in float32 beside it (GpuRunner::floatRowsBytes)
    std::uint64_t ramBytes = 0;          // routedExpertBytes + kvCacheBytes
    std::uint64_t vramBytes = 0;         // denseBytes + kvCacheBytes (+ kvCacheLayerBytes after withInt8KvCache)
    std::uint64_t downloadBytes = 0;     // the safetensors shards as published (FP8 with its scales, MTP)
    std::uint64_t storeBytes = 0;        // the converted store's model.safetensors and expert files
    std::uint64_t storeDenseBytes = 0;   // of those, model.safetensors
    int contextLength = 0;               // what the KV cache was counted for (capped by the model's limit)
    int moeLayers = 0;                   // layers with routed experts
    int expertsPerLayer = 0;             // routed experts in each
    int expertsPerToken = 0;             // chosen for each token in each layer
};

// Where the engine would put the routed experts on a GPU with `vramBytes` of memory (0: no GPU), by the
// rule it applies at load (core/expert_budget.h: whole MoE layers from the last, within what is left
// beside the dense part, the KV cache, a prompt chunk's activations and a margin; two staging layers for
// long prompts when not every layer fits), and what a decode step then reads from RAM. An estimate: the
// engine measures the free memory and the activations when it loads.
struct ExpertFit {
    int moeLayers = 0;
    int layersOnGpu = 0;                 // MoE layers whose routed experts the GPU holds wholly (the rest of
                                         // the budget holds single experts of one more layer)
    bool promptsStream = false;          // the others pass through the GPU for long prompts
    std::uint64_t ramBytesPerToken = 0;  // a decode step's reads from RAM: the CPU's chosen experts (and,
                                         // with no GPU, the dense part)
};
ExpertFit estimateExpertFit(const Footprint& need, std::uint64_t vramBytes);
// The footprint with the dense part in int8 (denseBytes and vramBytes from denseInt8Bytes), the store's
// too (convert --dense int8, StoreDense::Int8).
Footprint withInt8Dense(Footprint f);
// The footprint with the KV cache in int8 (KvCacheType::Int8): kvCacheBytes and ramBytes from
// kvCacheInt8Bytes, vramBytes from it and one layer's float32 rows (what a GPU engine holds).
Footprint withInt8KvCache(Footprint f);

// This machine's memory read speed in GB/s with every core reading (best of a few passes over ~1 GB,
// under a second, the first call of a process; later calls return that figure); what bounds decode when
// the CPU reads the experts. 0 when it could not be measured (not enough memory for the probe).
double measureMemoryBandwidthGbps();

// From DIR/config.json, or from a config.json file given directly. `experts` is BF16, INT8, INT4 or MXFP4
// (Auto counts as BF16). Throws tandem::Error for a missing, malformed or unsupported config.
Footprint estimateFootprint(const std::filesystem::path& modelDirOrConfigJson, ExpertPrecision experts,
                            int contextLength = 4096);
// The same from config.json's text; `where` names it in errors.
Footprint estimateFootprintFromJson(const std::string& configJson, ExpertPrecision experts, int contextLength = 4096,
                                    const std::string& where = "config.json");

// How a store holds the dense products (attention's projections, dense and shared MLPs, the output head).
enum class StoreDense {
    Checkpoint,  // as the input has them (bf16 for most releases, FP8 for DeepSeek's)
    Int8,        // int8 with a scale per row, as --dense int8 quantizes at load: half of bf16's bytes on
                 // disk and per decode step, and nothing to quantize when the store loads
    Bf16,        // F32, F16, FP8 and GGUF-quantized products widened or rounded to bf16
};

struct ConvertRequest {
    std::filesystem::path model;  // a Hugging Face model folder, or a llama.cpp .gguf file
    std::filesystem::path out;    // the store to write (built in OUT.partial, renamed at the end)
    // BF16, INT8, INT4 or MXFP4; Auto: the checkpoint's own 4-bit experts where a packed type holds them
    // exactly (gpt-oss's MXFP4, Kimi-K2-Thinking's int4), else BF16.
    ExpertPrecision experts = ExpertPrecision::BF16;
    int threads = 0;              // <= 0: one per hardware thread
    StoreDense dense = StoreDense::Checkpoint;
};

struct ConvertProgress {
    int layer = 0, layers = 0;  // MoE layers finished (packed, or kept from an interrupted run) of all
    int resumedLayers = 0;      // of those, kept from an interrupted run
    std::uint64_t bytesWritten = 0, bytesTotal = 0;  // by this run
    double seconds = 0;
};

struct ConvertOutcome {
    bool cancelled = false;  // onProgress asked to stop; OUT.partial stays and the same request resumes it
    bool upToDate = false;   // OUT already held this conversion
    int packedLayers = 0, resumedLayers = 0;
    bool denseResumed = false;     // the dense weights' file was kept from an interrupted run
    std::uint64_t bytesWritten = 0;
    double seconds = 0;
    std::filesystem::path store;
    // The finished store's verification record (tandem/store_check.h) could not be written: why. The
    // store is fine; it is read in full before its first use instead.
    std::string recordProblem;
};

// Converts request.model into a packed store at request.out, resuming an interrupted run of the same
// conversion. onProgress runs on the calling thread after every batch of experts and every piece of
// the dense file; returning false stops the conversion there. Throws tandem::Error with a message for
// the user (a bad input, an --out that is not a store, too little disk space, a write error).
ConvertOutcome convertModel(const ConvertRequest& request,
                            const std::function<bool(const ConvertProgress&)>& onProgress = {});

}  // namespace tandem
