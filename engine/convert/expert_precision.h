#pragma once
// The one mapping from the public expert option (tandem::ExpertPrecision) to a packed expert type.
#include <optional>

#include "io/expert_layout.h"
#include "tandem/engine.h"

namespace tandem::convert {

// The packed type an option asks for; none for Auto and Reference.
inline std::optional<io::ExpertType> packedType(ExpertPrecision precision) {
    switch (precision) {
    case ExpertPrecision::BF16: return io::ExpertType::BF16;
    case ExpertPrecision::INT8: return io::ExpertType::INT8;
    case ExpertPrecision::INT4: return io::ExpertType::INT4;
    case ExpertPrecision::MXFP4: return io::ExpertType::MXFP4;
    default: return std::nullopt;
    }
}

}  // namespace tandem::convert
