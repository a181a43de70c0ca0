#pragma once
// The one mapping from the public expert option (tandem::ExpertPrecision) to a packed expert type.
#include <optional>

#include "cpu/expert_format.h"
#include "tandem/engine.h"

namespace tandem::runtime {

// The packed type an option asks for; none for Auto and Reference.
inline std::optional<cpu::ExpertType> packedType(ExpertPrecision precision) {
    switch (precision) {
    case ExpertPrecision::BF16: return cpu::ExpertType::BF16;
    case ExpertPrecision::INT8: return cpu::ExpertType::INT8;
    case ExpertPrecision::INT4: return cpu::ExpertType::INT4;
    default: return std::nullopt;
    }
}

}  // namespace tandem::runtime
