#include "tandem/tuning.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <type_traits>

#include "tandem/engine.h"
#include "tandem/error.h"

namespace tandem {

namespace {

std::optional<std::string> variable(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

int integer(const char* name, int fallback, int min, int max) {
    const auto text = variable(name);
    if (!text) return fallback;
    int value = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc() || end != text->data() + text->size() || value < min || value > max)
        throw Error(std::string(name) + "='" + *text + "' must be a whole number from " + std::to_string(min) + " to " +
                    std::to_string(max) + " (unset it for the default, " + std::to_string(fallback) + ")");
    return value;
}

bool flag(const char* name, bool fallback) { return integer(name, fallback ? 1 : 0, 0, 1) != 0; }

// One entry of differences(): a value that is not the default.
template <class T>
void differs(std::string& out, const char* name, const T& value, const T& fallback) {
    if (value == fallback) return;
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    if constexpr (std::is_same_v<T, bool>)
        out += value ? "1" : "0";
    else if constexpr (std::is_same_v<T, std::string>)
        out += value;
    else
        out += std::to_string(value);
}

}  // namespace

Tuning Tuning::fromEnvironment() {
    Tuning t;
    t.cpuIsa = variable("TANDEM_CPU_ISA").value_or("");
    t.simulatedNumaNodes = integer("TANDEM_NUMA_SIM", 0, 1, 64);
    t.avx512PrefetchBytes = integer("TANDEM_CPU_PF_AHEAD", t.avx512PrefetchBytes, 0, 1 << 20);
    t.downJobsPerThread = integer("TANDEM_DOWN_JOBS", t.downJobsPerThread, 1, 1024);
    t.amxSliceKib = integer("TANDEM_AMX_SLICE_KIB", t.amxSliceKib, 16, 1 << 20);
    t.amxAccKib = integer("TANDEM_AMX_ACC_KIB", t.amxAccKib, 4, 1 << 20);
    t.amxCacheBlocksMax = integer("TANDEM_AMX_KC", t.amxCacheBlocksMax, 0, 1 << 16);
    t.amxPrefetchBlocks = integer("TANDEM_AMX_PREFETCH", t.amxPrefetchBlocks, 0, 64);
    t.amxInt4Lag = integer("TANDEM_AMX_INT4_LAG", t.amxInt4Lag, 0, 3);
    t.amxStream = flag("TANDEM_AMX_STREAM", t.amxStream);
    if (const auto p = variable("TANDEM_GPU_PRECISION")) {
        if (*p != "bf16" && *p != "split")
            throw Error("TANDEM_GPU_PRECISION='" + *p + "' must be split (the default) or bf16");
        t.gpuSplitPrecision = *p == "split";
    }
    t.gpuFp8 = flag("TANDEM_GPU_FP8", t.gpuFp8);
    t.gpuChain = flag("TANDEM_GPU_CHAIN", t.gpuChain);
    t.gpuPrefetchMb = integer("TANDEM_GPU_PREFETCH_MB", t.gpuPrefetchMb, 0, 1 << 20);
    t.gpuSplitAttentionUntil = integer("TANDEM_GPU_SPLIT_ATTENTION_UNTIL", t.gpuSplitAttentionUntil, 0, 1 << 30);
    t.gpuFlashPrefill = flag("TANDEM_GPU_FLASH", t.gpuFlashPrefill);
    t.gpuProfile = flag("TANDEM_GPU_PROFILE", t.gpuProfile);
    t.gpuStreamMinTokens = integer("TANDEM_GPU_STREAM_MIN_TOKENS", t.gpuStreamMinTokens, 0, 1 << 20);
    t.gpuPrefillChunk = integer("TANDEM_GPU_CHUNK", t.gpuPrefillChunk, 0, 1 << 16);
    t.gpuStreamCpuPercent = integer("TANDEM_GPU_STREAM_CPU", t.gpuStreamCpuPercent, 0, 99);
    t.cpuAttentionKernels = flag("TANDEM_CPU_ATTENTION", t.cpuAttentionKernels);
    t.gpuStreamRouted = integer("TANDEM_GPU_STREAM_ROUTED", t.gpuStreamRouted, 0, 1);
    t.gpuStreamLog = flag("TANDEM_GPU_STREAM_LOG", t.gpuStreamLog);
    t.gpuExpertSplits = integer("TANDEM_GPU_EXPERT_SPLITS", t.gpuExpertSplits, 0, 3);
    t.gpuStages = integer("TANDEM_GPU_STAGES", t.gpuStages, 1, 16);
    if (const auto devices = variable("TANDEM_GPU_DEVICES")) t.gpuDevices = parseGpuDevices(*devices, "TANDEM_GPU_DEVICES");
    return t;
}

std::string Tuning::differences() const {
    const Tuning d;
    std::string out;
    differs(out, "TANDEM_CPU_ISA", cpuIsa, d.cpuIsa);
    differs(out, "TANDEM_NUMA_SIM", simulatedNumaNodes, d.simulatedNumaNodes);
    differs(out, "TANDEM_CPU_PF_AHEAD", avx512PrefetchBytes, d.avx512PrefetchBytes);
    differs(out, "TANDEM_DOWN_JOBS", downJobsPerThread, d.downJobsPerThread);
    differs(out, "TANDEM_AMX_SLICE_KIB", amxSliceKib, d.amxSliceKib);
    differs(out, "TANDEM_AMX_ACC_KIB", amxAccKib, d.amxAccKib);
    differs(out, "TANDEM_AMX_KC", amxCacheBlocksMax, d.amxCacheBlocksMax);
    differs(out, "TANDEM_AMX_PREFETCH", amxPrefetchBlocks, d.amxPrefetchBlocks);
    differs(out, "TANDEM_AMX_INT4_LAG", amxInt4Lag, d.amxInt4Lag);
    differs(out, "TANDEM_AMX_STREAM", amxStream, d.amxStream);
    if (gpuSplitPrecision != d.gpuSplitPrecision) out += std::string(out.empty() ? "" : " ") + "TANDEM_GPU_PRECISION=bf16";
    differs(out, "TANDEM_GPU_FP8", gpuFp8, d.gpuFp8);
    differs(out, "TANDEM_GPU_CHAIN", gpuChain, d.gpuChain);
    differs(out, "TANDEM_GPU_PREFETCH_MB", gpuPrefetchMb, d.gpuPrefetchMb);
    differs(out, "TANDEM_GPU_SPLIT_ATTENTION_UNTIL", gpuSplitAttentionUntil, d.gpuSplitAttentionUntil);
    differs(out, "TANDEM_GPU_FLASH", gpuFlashPrefill, d.gpuFlashPrefill);
    differs(out, "TANDEM_GPU_PROFILE", gpuProfile, d.gpuProfile);
    differs(out, "TANDEM_GPU_STREAM_MIN_TOKENS", gpuStreamMinTokens, d.gpuStreamMinTokens);
    differs(out, "TANDEM_GPU_CHUNK", gpuPrefillChunk, d.gpuPrefillChunk);
    differs(out, "TANDEM_GPU_STREAM_CPU", gpuStreamCpuPercent, d.gpuStreamCpuPercent);
    differs(out, "TANDEM_CPU_ATTENTION", cpuAttentionKernels, d.cpuAttentionKernels);
    differs(out, "TANDEM_GPU_STREAM_ROUTED", gpuStreamRouted, d.gpuStreamRouted);
    differs(out, "TANDEM_GPU_STREAM_LOG", gpuStreamLog, d.gpuStreamLog);
    differs(out, "TANDEM_GPU_EXPERT_SPLITS", gpuExpertSplits, d.gpuExpertSplits);
    differs(out, "TANDEM_GPU_STAGES", gpuStages, d.gpuStages);
    std::string devices;
    for (const int device : gpuDevices) devices += (devices.empty() ? "" : ",") + (device == kEveryGpu ? "all" : std::to_string(device));
    differs(out, "TANDEM_GPU_DEVICES", devices, std::string());
    return out;
}

void numberGpusAsNvidiaSmi() { setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0); }

std::vector<int> parseGpuDevices(const std::string& text, const std::string& source) {
    if (text == "all") return {kEveryGpu};
    std::vector<int> devices;
    std::size_t from = 0;
    while (from <= text.size()) {
        const std::size_t to = std::min(text.find(',', from), text.size());
        int d = -1;
        const char* first = text.data() + from;
        const char* last = text.data() + to;
        const auto [end, error] = std::from_chars(first, last, d);
        if (error != std::errc() || end != last || d < 0 || d > 63 || std::find(devices.begin(), devices.end(), d) != devices.end())
            throw Error(source + "='" + text + "' must list distinct GPU numbers separated by commas, e.g. 1 or 0,1, or be all");
        devices.push_back(d);
        from = to + 1;
    }
    return devices;
}

const Tuning& tuning() {
    // Read once; a malformed variable is an error at every call (the first caller is Engine::load).
    static std::once_flag once;
    static Tuning settings;
    static std::string error;
    std::call_once(once, [] {
        try {
            settings = Tuning::fromEnvironment();
        } catch (const Error& e) {
            error = e.what();
        }
    });
    if (!error.empty()) throw Error(error);
    return settings;
}

}  // namespace tandem
