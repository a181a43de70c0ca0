#pragma once
// The text files of a model folder, which come from the internet: read whole, and only when they are
// regular files (a FIFO named config.json would block the reader forever); their JSON refused past a
// nesting depth no model file comes near, before code that walks it recursively (tokenizer.json's
// normalizers and decoders, a template's values) could overflow the stack.
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::io {

// Real files nest a few levels (tokenizer.json about 6, a chat with tool calls about 10).
inline constexpr int kMaxJsonDepth = 128;

// The whole file. Throws Error naming the file when it cannot be read or is not a regular file.
std::string readRegularFile(const std::filesystem::path& path);

[[noreturn]] void failJsonDepth(const std::string& where);

// Json::parse that also refuses nesting deeper than kMaxJsonDepth (an Error naming `where`); syntax
// errors are the parser's own exceptions, as with Json::parse.
template <class Json>
Json parseJson(std::string_view text, const std::string& where) {
    using Event = typename Json::parse_event_t;
    return Json::parse(text, [&](int depth, Event event, Json&) {
        // `depth` counts the containers around this event: an object or array opening at depth N is
        // the (N+1)th level.
        if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) failJsonDepth(where);
        return true;
    });
}

}  // namespace tandem::io
