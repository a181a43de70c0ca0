#pragma once
// The text files of a model folder, which come from the internet: read whole, and only when they are
// regular files (a FIFO named config.json would block the reader forever); their JSON refused past a
// nesting depth no model file comes near, before code that walks it recursively (tokenizer.json's
// normalizers and decoders, a template's values) could overflow the stack.
#include <filesystem>
#include <string>
#include <string_view>

#include "tandem/error.h"
#include "tandem/json_input.h"

namespace tandem::io {

// The whole file. Throws Error naming the file when it cannot be read or is not a regular file.
std::string readRegularFile(const std::filesystem::path& path);

// The depth-limited JSON parsing of tandem/json_input.h, under the names the engine's readers use.
using tandem::failJsonDepth;
using tandem::kMaxJsonDepth;
using tandem::parseJson;

}  // namespace tandem::io
