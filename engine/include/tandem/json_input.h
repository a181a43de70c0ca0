#pragma once
// JSON that comes from outside (a model folder's files, a client's request): parsed with nlohmann-json,
// refused past a nesting depth no real document comes near, before code that walks it recursively
// could overflow the stack.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem {

// Real files nest a few levels (tokenizer.json about 6, a chat with tool calls about 10).
inline constexpr int kMaxJsonDepth = 128;

// Throws tandem::Error: `where` nests deeper than kMaxJsonDepth.
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

}  // namespace tandem
