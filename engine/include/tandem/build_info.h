#pragma once
// What this build of Tandem is and what it will run on this machine: shown by `tandem-cli --version`,
// `tandem --version` and the desktop app's About dialog, and asked for in bug reports.
#include <string>
#include <vector>

namespace tandem {

struct BuildInfo {
    std::string version;                  // the project version, "0.1.0"
    std::string revision;                 // git describe of the source ("ffe0b67", "v0.1.0-3-gffe0b67-dirty"),
                                          // or "unknown" when not built from a git checkout
    bool cuda = false;                    // the hybrid GPU path is compiled in
    std::string cudaVersion;              // the CUDA toolkit it was built with ("13.0"); empty without CUDA
    std::vector<std::string> cpuKernels;  // the expert kernels compiled in: "scalar", "avx2", ...
    std::string cpuKernel;                // the kernel this machine runs ("avx512"), or why none can run
    std::string cpuKernelSource;          // why that one: "best for this CPU" or "TANDEM_CPU_ISA"
    std::string compiler;                 // "GCC 12.2.0"
    // The tuning settings (tandem/tuning.h) that differ from the defaults, "TANDEM_AMX_KC=16 ..."; empty
    // when none do; or why they cannot be read.
    std::string tuning;
};

// Decided once per process (the CPU kernel choice reads CPUID and TANDEM_CPU_ISA).
const BuildInfo& buildInfo();

// The lines `--version` prints: "<program> <version> (<revision>)", then GPU path, CPU kernels and
// compiler, each "Name: value". Ends with a newline.
std::string describeBuild(const std::string& program);

}  // namespace tandem
