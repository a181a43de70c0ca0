#include <string>

#include "cpu/kernels/expert_kernels.h"
#include "tandem/error.h"

namespace tandem::cpu {

const ExpertKernels& kernelsFor(Isa isa) {
    const std::string missing = isaMissing(isa);
    if (!missing.empty())
        throw Error("the " + std::string(isaName(isa)) + " expert kernels cannot run on this machine (it lacks " +
                    missing + "); choose " + std::string(isaName(bestIsa())) + " or a lower level");
    switch (isa) {
    case Isa::Scalar: return scalarKernels();
    case Isa::Avx2: return avx2Kernels();
    case Isa::Avx512: return avx512Kernels();
    case Isa::Amx: return amxKernels();
    }
    return scalarKernels();
}

}  // namespace tandem::cpu
