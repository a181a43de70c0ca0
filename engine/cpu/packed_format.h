#pragma once
// The store's packed expert layout (io/expert_layout.h) under the names the CPU kernels use.
#include "io/expert_layout.h"

#include <cstdint>

namespace tandem::cpu {

using io::blockBytesOf;
using io::blockColumns;
using io::ExpertLayout;
using io::ExpertType;
using io::expertTypeName;
using io::kActGroup;
using io::kAllExpertTypes;
using io::kChunkCols;
using io::kExpertAlignment;
using io::kExpertTypeCount;
using io::kInt4Group;
using io::kMxfp4Group;
using io::isGrouped4Bit;
using io::kPanelRows;
using io::kPanelsPerChunk;
using io::parseExpertType;

// MXFP4's e2m1 values times two, by nibble: {0, .5, 1, 1.5, 2, 3, 4, 6}, then the same negative. The
// kernels multiply these integers and fold the 1/2 into the group's scale (io/expert_layout.h).
inline constexpr std::int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// The same plus 12, unsigned in [0, 24]: what the VNNI kernels' unsigned weight operand takes.
inline constexpr std::uint8_t kFp4Biased = 12;

}  // namespace tandem::cpu
