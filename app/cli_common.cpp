#include "cli_common.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tandem/byte_size.h"
#include "tandem/error.h"

std::vector<int> parseIds(const std::string& text, const std::string& where) {
    std::istringstream in(text);
    std::vector<int> ids;
    std::string word;
    while (in >> word) {
        try {
            std::size_t used = 0;
            const long v = std::stol(word, &used);
            if (used != word.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(word);
            ids.push_back(static_cast<int>(v));
        } catch (const std::exception&) {
            throw tandem::Error(where + ": '" + word + "' is not a token id");
        }
    }
    if (ids.empty()) throw tandem::Error(where + " holds no token ids");
    return ids;
}

std::vector<int> readIdsFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw tandem::Error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return parseIds(s.str(), path);
}

std::vector<std::vector<int>> readPromptsFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw tandem::Error("cannot read " + path);
    std::vector<std::vector<int>> prompts;
    int lineNumber = 0;
    for (std::string line; std::getline(in, line);) {
        ++lineNumber;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        prompts.push_back(parseIds(line, path + " line " + std::to_string(lineNumber)));
    }
    if (prompts.empty()) throw tandem::Error(path + " holds no prompts: write one line of token ids per prompt");
    return prompts;
}

std::string formatDuration(double seconds) {
    const long s = static_cast<long>(seconds + 0.5);
    char text[32];
    if (s >= 3600)
        std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
    return text;
}

void printIds(const std::vector<int>& ids) {
    for (std::size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
}


tandem::Device parseDevice(const std::string& name) {
    if (name == "auto") return tandem::Device::Auto;
    if (name == "cpu") return tandem::Device::Cpu;
    if (name == "gpu") return tandem::Device::Gpu;
    throw tandem::Error("--device must be cpu, gpu or auto, not '" + name + "'");
}

tandem::ExpertPrecision parseExperts(const std::string& name) {
    if (name == "auto") return tandem::ExpertPrecision::Auto;
    if (name == "bf16") return tandem::ExpertPrecision::BF16;
    if (name == "int8") return tandem::ExpertPrecision::INT8;
    if (name == "int4") return tandem::ExpertPrecision::INT4;
    if (name == "mxfp4") return tandem::ExpertPrecision::MXFP4;
    if (name == "reference") return tandem::ExpertPrecision::Reference;
    throw tandem::Error("--experts must be auto, bf16, int8, int4, mxfp4 or reference, not '" + name + "'");
}

std::int64_t parseGpuMemory(const CliArgs& args) {
    const auto text = args.optional("--gpu-memory");
    if (!text || *text == "auto") return -1;
    return static_cast<std::int64_t>(tandem::parseByteSize(*text, "--gpu-memory"));
}

tandem::DensePrecision parseDense(const CliArgs& args) {
    const std::string name = args.optional("--dense").value_or("checkpoint");
    if (name == "checkpoint") return tandem::DensePrecision::Checkpoint;
    if (name == "int8") return tandem::DensePrecision::Int8;
    if (name == "int4") return tandem::DensePrecision::Int4;
    throw tandem::Error("--dense must be checkpoint, int8 or int4, not '" + name + "'");
}

tandem::KvCacheType parseKvCache(const CliArgs& args) {
    const std::string name = args.optional("--kv-cache").value_or("f32");
    if (name == "f32" || name == "float32") return tandem::KvCacheType::Float32;
    if (name == "int8") return tandem::KvCacheType::Int8;
    throw tandem::Error("--kv-cache must be f32 or int8, not '" + name + "'");
}

tandem::EngineOptions engineOptions(const CliArgs& args, const std::string& defaultExperts) {
    tandem::EngineOptions options;
    options.threads = args.integer("--threads", 0);
    options.contextLength = args.integer("--context", options.contextLength);
    options.device = parseDevice(args.optional("--device").value_or("auto"));
    options.gpuExpertMemory = parseGpuMemory(args);
    if (const auto gpus = args.optional("--gpus")) options.gpuDevices = tandem::parseGpuDevices(*gpus, "--gpus");
    options.experts = parseExperts(args.optional("--experts").value_or(defaultExperts));
    options.dense = parseDense(args);
    options.kvCache = parseKvCache(args);
    return options;
}

void reportDevice(const tandem::ModelInfo& info) {
    if (!info.deviceNotice.empty()) std::fprintf(stderr, "note: %s\n", info.deviceNotice.c_str());
    if (!info.gpuSessionsNotice.empty()) std::fprintf(stderr, "note: %s\n", info.gpuSessionsNotice.c_str());
    if (!info.kvCacheNotice.empty()) std::fprintf(stderr, "note: %s\n", info.kvCacheNotice.c_str());
    if (!info.expertsNotice.empty()) std::fprintf(stderr, "note: %s\n", info.expertsNotice.c_str());
    if (info.device != "CPU" && !info.placement.empty()) std::fprintf(stderr, "routed experts: %s\n", info.placement.c_str());
    for (const std::string& stage : info.gpuStages) std::fprintf(stderr, "pipeline stage: %s\n", stage.c_str());
}

void applyDeferral(const CliArgs& args, tandem::Session& session) {
    const int defer = args.integer("--defer", 0), skip = args.integer("--skip", 0);
    if (defer < 0 || skip < 0) throw tandem::Error("--defer and --skip take a count of experts, 0 or more");
    if (defer > 0 && skip > 0) throw tandem::Error("--defer and --skip exclude each other");
    session.setDeferral(defer > 0 ? defer : skip, skip > 0);
    session.setPrefillDeferral(args.flag("--defer-prefill"));
}
