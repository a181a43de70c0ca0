#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tandem/error.h"
#include "text/onig_syntax.h"

namespace tandem::text {
namespace {

std::string pcre2Message(int code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(code, buffer, sizeof buffer);
    return reinterpret_cast<const char*>(buffer);
}

// Per-thread matching state, created once and reused for every match on that thread: one ovector pair
// is enough because only the whole match is used, and the JIT stack is larger than PCRE2's default so
// that long runs of whitespace against lookahead patterns cannot exhaust it.
class MatchScratch {
public:
    MatchScratch()
        : data_(pcre2_match_data_create(1, nullptr)),
          context_(pcre2_match_context_create(nullptr)),
          stack_(pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr)) {
        if (!data_ || !context_ || !stack_) throw std::bad_alloc();
        pcre2_jit_stack_assign(context_, nullptr, stack_);
    }
    ~MatchScratch() {
        pcre2_jit_stack_free(stack_);
        pcre2_match_context_free(context_);
        pcre2_match_data_free(data_);
    }
    MatchScratch(const MatchScratch&) = delete;
    MatchScratch& operator=(const MatchScratch&) = delete;

    pcre2_match_data* data() const { return data_; }
    pcre2_match_context* context() const { return context_; }

private:
    pcre2_match_data* data_;
    pcre2_match_context* context_;
    pcre2_jit_stack* stack_;
};

MatchScratch& scratch() {
    thread_local MatchScratch s;
    return s;
}

}  // namespace

Regex::Regex(std::string_view pattern, const std::string& where) : where_(where) {
    const std::string translated = oniguramaToPcre2(pattern, where);
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                     PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
    if (!code)
        throw Error(where + ": the regex /" + std::string(pattern) + "/ does not compile (" + pcre2Message(errorCode) +
                    " at offset " + std::to_string(errorOffset) +
                    "); the tokenizer.json is damaged or uses a regex feature PCRE2 lacks");
    code_.reset(code, pcre2_code_free);
    // Without JIT support (some platforms) the interpreter gives the same results, only slower.
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

std::optional<Regex::Match> Regex::find(std::string_view text, std::size_t from) const {
    MatchScratch& s = scratch();
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const int rc = jit_ ? pcre2_jit_match(code_.get(), subject, text.size(), from, PCRE2_NOTEMPTY, s.data(), s.context())
                        : pcre2_match(code_.get(), subject, text.size(), from, PCRE2_NOTEMPTY | PCRE2_NO_UTF_CHECK,
                                      s.data(), s.context());
    if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
    // rc == 0 means the ovector was too small for the capture groups, but the whole match is there.
    if (rc < 0) throw Error(where_ + ": matching the regex failed (" + pcre2Message(rc) + ")");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data());
    return Match{ovector[0], ovector[1]};
}

}  // namespace tandem::text
