#pragma once
// StopStringFilter is public (tandem/stop_strings.h); the engine's code names it here too.
#include "tandem/stop_strings.h"

namespace tandem::runtime {
using tandem::StopStringFilter;
}  // namespace tandem::runtime
