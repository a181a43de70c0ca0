#include "tandem/build_info.h"
#include "tandem/tuning.h"

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
    // A malformed tuning variable: --version still answers, and says what loading a model would say.
    Tuning tuning;
    try {
        tuning = Tuning::fromEnvironment();
        info.tuning = tuning.differences();
    } catch (const Error& e) {
        info.tuning = std::string("none read: ") + e.what();
    }
    info.cpuKernelSource = tuning.cpuIsa.empty() ? "best for this CPU" : "TANDEM_CPU_ISA";
    try {
        info.cpuKernel = cpu::isaName(cpu::resolveIsa(tuning.cpuIsa.c_str()));
    } catch (const Error& e) {
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
    text += "Tuning: " + (b.tuning.empty() ? std::string("the measured defaults") : b.tuning) + "\n";
    return text;
}

}  // namespace tandem
