#pragma once
// A compiled regular expression of a tokenizer.json (Split pre-tokenizer, Replace normalizer or
// decoder), run by PCRE2 in UTF mode with Unicode properties (\p{L}, \s, ...) and JIT compilation.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace tandem::text {

class Regex {
public:
    struct Match {
        std::size_t start;
        std::size_t end;
    };

    // `where` names the pattern's place (file and JSON path) in the error for a pattern PCRE2 rejects.
    Regex(std::string_view pattern, const std::string& where);

    // The leftmost non-empty match starting at or after byte `from` of `text`, which must be valid
    // UTF-8 (checked once by the caller, so matching skips PCRE2's own check).
    std::optional<Match> find(std::string_view text, std::size_t from) const;

private:
    std::shared_ptr<pcre2_real_code_8> code_;
    bool jit_ = false;
    std::string where_;
};

}  // namespace tandem::text
