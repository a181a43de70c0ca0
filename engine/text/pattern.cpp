#include "text/pattern.h"

#include <nlohmann/json.hpp>

namespace tandem::text {

Pattern Pattern::fromJson(const Json& pattern, const std::string& where) {
    if (pattern.is_object() && pattern.size() == 1) {
        if (pattern.contains("String")) return literal(stringField(pattern, "String", where));
        if (pattern.contains("Regex")) {
            const std::string regex = stringField(pattern, "Regex", where);
            return Pattern({}, Regex(regex, where + ".Regex"));
        }
    }
    throwMalformed(where, "expected {\"String\": ...} or {\"Regex\": ...}");
}

Pattern Pattern::literal(std::string text) { return Pattern(std::move(text), std::nullopt); }

std::optional<Regex::Match> Pattern::find(std::string_view text, std::size_t from) const {
    if (regex_) return regex_->find(text, from);
    if (literal_.empty()) return std::nullopt;
    const std::size_t at = text.find(literal_, from);
    if (at == std::string_view::npos) return std::nullopt;
    return Regex::Match{at, at + literal_.size()};
}

std::string Pattern::replaceAll(std::string_view text, std::string_view replacement) const {
    std::string out;
    out.reserve(text.size());
    std::size_t done = 0;
    while (const auto match = find(text, done)) {
        out.append(text.substr(done, match->start - done));
        out.append(replacement);
        done = match->end;
    }
    out.append(text.substr(done));
    return out;
}

}  // namespace tandem::text
