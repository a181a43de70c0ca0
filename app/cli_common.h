#pragma once
// Helpers shared by the tandem-cli commands.
#include <cstdint>
#include <string>
#include <vector>

#include "cli_args.h"
#include "tandem/engine.h"

// Whitespace-separated token ids; `where` names the source in errors.
std::vector<int> parseIds(const std::string& text, const std::string& where);
std::vector<int> readIdsFile(const std::string& path);
// One prompt of whitespace-separated ids per line; blank lines are skipped.
std::vector<std::vector<int>> readPromptsFile(const std::string& path);
// "4:05", "1:02:03".
std::string formatDuration(double seconds);
// Prints ids space-separated on one line.
void printIds(const std::vector<int>& ids);

// "cpu", "gpu" or "auto".
tandem::Device parseDevice(const std::string& name);
// "auto", "bf16", "int8", "int4" or "reference".
tandem::ExpertPrecision parseExperts(const std::string& name);
// --gpu-memory SIZE|auto: GPU memory for routed experts (EngineOptions::gpuExpertMemory); absent: auto.
std::int64_t parseGpuMemory(const CliArgs& args);
// --dense checkpoint|int8 (default checkpoint): the CPU path's dense weights.
tandem::DensePrecision parseDense(const CliArgs& args);
// --kv-cache f32|int8 (default f32): how the sessions hold their KV cache, on either path.
tandem::KvCacheType parseKvCache(const CliArgs& args);
// Prints why the CPU runs what the GPU would have, if so.
void reportDevice(const tandem::ModelInfo& info);
// The engine options every model command takes: --threads, --context (when given), --device,
// --gpu-memory, --experts (defaultExperts when absent), --dense and --kv-cache.
tandem::EngineOptions engineOptions(const CliArgs& args, const std::string& defaultExperts = "auto");
// --defer D (Expert Deferral) or --skip D (drop the D lowest-weighted experts instead).
void applyDeferral(const CliArgs& args, tandem::Session& session);
