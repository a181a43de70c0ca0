#include "cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "tandem/error.h"
#include "tandem/tuning.h"

namespace tandem::cpu {

namespace {

struct Features {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false,
         avx512bf16 = false;
    bool amxTile = false, amxBf16 = false, amxInt8 = false;
    std::uint64_t xcr0 = 0;
};

std::uint64_t readXcr0() {
    std::uint32_t lo, hi;
    // xgetbv is in every CPU with OSXSAVE; the caller checks that bit first.
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

Features readFeatures() {
    Features f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27);
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    if (osxsave) f.xcr0 = readXcr0();
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = b & (1u << 5);
        f.avx512f = b & (1u << 16);
        f.avx512dq = b & (1u << 17);
        f.avx512bw = b & (1u << 30);
        f.avx512vl = b & (1u << 31);
        f.avx512vnni = c & (1u << 11);
        f.amxBf16 = d & (1u << 22);
        f.amxTile = d & (1u << 24);
        f.amxInt8 = d & (1u << 25);
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = a & (1u << 5);
    return f;
}

const Features& features() {
    static const Features f = readFeatures();
    return f;
}

// Linux hands out the 8 KiB AMX tile state only to processes that ask (kernel 5.16+); without the
// permission the first tile instruction kills the process.
bool requestAmxPermission() {
    constexpr int kArchGetXcompPerm = 0x1022;
    constexpr int kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    static const bool granted = [] {
        if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
        std::uint64_t bits = 0;
        if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bits) != 0) return false;
        return (bits & (1ull << kXfeatureXtiledata)) != 0;
    }();
    return granted;
}

void need(std::string& missing, bool have, const char* what) {
    if (have) return;
    if (!missing.empty()) missing += ", ";
    missing += what;
}

}  // namespace

std::string_view isaName(Isa isa) {
    switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Amx: return "amx";
    }
    return "?";
}

std::optional<Isa> parseIsa(std::string_view name) {
    for (const Isa isa : kAllIsas)
        if (isaName(isa) == name) return isa;
    return std::nullopt;
}

std::string isaMissing(Isa isa) {
    const Features& f = features();
    std::string missing;
    if (isa >= Isa::Avx2) {
        need(missing, f.avx2, "AVX2");
        need(missing, f.fma, "FMA");
        need(missing, f.f16c, "F16C");
        need(missing, (f.xcr0 & 0x6) == 0x6, "OS support for AVX state");
    }
    if (isa >= Isa::Avx512) {
        need(missing, f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq, "AVX-512 F/BW/VL/DQ");
        need(missing, f.avx512vnni, "AVX512-VNNI");
        need(missing, f.avx512bf16, "AVX512-BF16");
        need(missing, (f.xcr0 & 0xe0) == 0xe0, "OS support for AVX-512 state");
    }
    if (isa >= Isa::Amx) {
        need(missing, f.amxTile, "AMX-TILE");
        need(missing, f.amxBf16, "AMX-BF16");
        need(missing, f.amxInt8, "AMX-INT8");
        const bool osTiles = (f.xcr0 & 0x60000) == 0x60000;
        need(missing, osTiles, "OS support for AMX tile state");
        if (f.amxTile && osTiles) need(missing, requestAmxPermission(), "Linux permission for AMX tile data (kernel 5.16+)");
    }
    return missing;
}

Isa bestIsa() {
    for (Isa isa : {Isa::Amx, Isa::Avx512, Isa::Avx2})
        if (isaSupported(isa)) return isa;
    return Isa::Scalar;
}

Isa resolveIsa(const char* override) {
    if (!override || !*override) return bestIsa();
    const auto isa = parseIsa(override);
    if (!isa)
        throw Error(std::string("TANDEM_CPU_ISA='") + override +
                    "' is not a known instruction set; use scalar, avx2, avx512 or amx, or unset it");
    const std::string missing = isaMissing(*isa);
    if (!missing.empty())
        throw Error(std::string("TANDEM_CPU_ISA=") + override + " asks for kernels this machine cannot run (it lacks " +
                    missing + "); unset TANDEM_CPU_ISA or choose " + std::string(isaName(bestIsa())) +
                    " or a lower level");
    return *isa;
}

Isa selectedIsa() {
    static std::once_flag once;
    static Isa isa = Isa::Scalar;
    static std::string error;
    std::call_once(once, [] {
        try {
            isa = resolveIsa(tuning().cpuIsa.c_str());
        } catch (const Error& e) {
            error = e.what();
        }
    });
    if (!error.empty()) throw Error(error);
    return isa;
}

}  // namespace tandem::cpu
