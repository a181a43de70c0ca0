#pragma once
// The store's packed expert layout (io/expert_layout.h) under the names the CPU kernels use.
#include "io/expert_layout.h"

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
using io::kInt4Group;
using io::kPanelRows;
using io::kPanelsPerChunk;
using io::parseExpertType;

}  // namespace tandem::cpu
