#include "tandem/build_info.h"

#include <cstdlib>

#include "cpu/cpu_features.h"
#include "tandem/error.h"
#include "tandem_revision.h"  // generated at every build by cmake/WriteRevision.cmake

namespace tandem {
namespace {

std::string compilerName() {
#if defined(__clang__)
    return "Clang " __clang_version__;
#elif defined(__GNUC__)
    return "GCC " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
           std::to_string(__GNUC_PATCHLEVEL__);
#else
    return "unknown compiler";
#endif
}

BuildInfo collect() {
    BuildInfo info;
    info.version = TANDEM_VERSION;
    info.revision = TANDEM_GIT_REVISION;
    info.cuda = TANDEM_BUILT_WITH_CUDA;
    info.cudaVersion = TANDEM_CUDA_VERSION;
    for (const cpu::Isa isa : cpu::kAllIsas) info.cpuKernels.emplace_back(cpu::isaName(isa));
    const char* forced = std::getenv("TANDEM_CPU_ISA");
    info.cpuKernelSource = forced && *forced ? "TANDEM_CPU_ISA" : "best for this CPU";
    try {
        info.cpuKernel = cpu::isaName(cpu::resolveIsa(forced));
    } catch (const Error& e) {
        // A bad TANDEM_CPU_ISA: --version still answers, and says what loading a model would say.
        info.cpuKernel = std::string("none: ") + e.what();
    }
    info.compiler = compilerName();
    return info;
}

std::string joined(const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
    return text;
}

}  // namespace

const BuildInfo& buildInfo() {
    static const BuildInfo info = collect();
    return info;
}

std::string describeBuild(const std::string& program) {
    const BuildInfo& b = buildInfo();
    std::string text = program + " " + b.version + " (" + b.revision + ")\n";
    text += "GPU path: " + (b.cuda ? "CUDA " + b.cudaVersion : std::string("not built (CPU only)")) + "\n";
    text += "CPU kernels built: " + joined(b.cpuKernels) + "\n";
    text += "CPU kernel used: " + b.cpuKernel + " (" + b.cpuKernelSource + ")\n";
    text += "Compiler: " + b.compiler + "\n";
    return text;
}

}  // namespace tandem
