#pragma once
// Which SIMD instruction sets the expert kernels may use, decided at run time from CPUID and from what
// the operating system enables (XCR0; for AMX also Linux's tile-data permission), so that one binary
// runs on every x86-64 CPU. TANDEM_CPU_ISA=scalar|avx2|avx512|amx overrides the choice for testing.
#include <optional>
#include <string>
#include <string_view>

namespace tandem::cpu {

// Ordered: each level includes everything the levels before it need.
//   Avx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later)
//   Avx512: AVX-512 F/BW/VL/DQ + VNNI + BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later)
//   Amx:    Avx512 + AMX-TILE/BF16/INT8 (Sapphire Rapids and later)
enum class Isa { Scalar, Avx2, Avx512, Amx };

inline constexpr Isa kAllIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx};

std::string_view isaName(Isa isa);
std::optional<Isa> parseIsa(std::string_view name);

// Empty when this CPU and OS can run `isa`, else what is missing ("AMX-TILE", "OS support for AVX-512
// state", ...). Asking about Amx requests the tile-data permission from Linux once per process.
std::string isaMissing(Isa isa);
inline bool isaSupported(Isa isa) { return isaMissing(isa).empty(); }

// The most capable level this machine runs.
Isa bestIsa();

// The level named by `override` (a TANDEM_CPU_ISA value), or bestIsa() when it is null or empty.
// Throws tandem::Error, saying what to do, for an unknown name or a level this machine cannot run.
Isa resolveIsa(const char* override);

// resolveIsa(tuning().cpuIsa) (TANDEM_CPU_ISA), decided on the first call.
Isa selectedIsa();

}  // namespace tandem::cpu
