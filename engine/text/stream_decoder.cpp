#include "tandem/stream_decoder.h"

#include <algorithm>
#include <string_view>

#include "text/utf8.h"

namespace tandem::text {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// A UTF-8 character has at most four bytes and every token carries at least one, so after four pending
// tokens a trailing U+FFFD is real (the model produced invalid bytes) rather than a character in transit.
constexpr std::size_t kMostTokensPerCharacter = 4;

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
std::size_t partialTagAtEnd(std::string_view text, std::string_view tag) {
    for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
        if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

}  // namespace

StreamDecoder::StreamDecoder(Tokenizer tokenizer, Options options)
    : tokenizer_(std::move(tokenizer)),
      options_(options),
      kind_(options.startsInReasoning ? StreamText::Kind::Reasoning : StreamText::Kind::Answer),
      thinkOpenId_(tokenizer_.tokenToId(kThinkOpen)),
      thinkCloseId_(tokenizer_.tokenToId(kThinkClose)),
      shownSpecial_(options_.shownSpecialTokens) {}

std::vector<StreamText> StreamDecoder::push(int id) {
    std::vector<StreamText> out;
    const bool opensThinking = thinkOpenId_ && id == *thinkOpenId_;
    const bool closesThinking = thinkCloseId_ && id == *thinkCloseId_;
    if (opensThinking || closesThinking) {
        // Text before a tag can never be completed by a later token, so it goes out as it is.
        route(takeNewText(true), out);
        flushTagHoldback(out);
        if (opensThinking != inReasoning()) switchKind();
        return out;
    }
    if (tokenizer_.isSpecial(id) && std::find(shownSpecial_.begin(), shownSpecial_.end(), id) == shownSpecial_.end()) return out;
    if (!tokenizer_.idToToken(id))
        throw Error("the generated token id " + std::to_string(id) + " is outside the tokenizer's vocabulary of " +
                    std::to_string(tokenizer_.vocabSize()) + " ids; the model and its tokenizer.json do not match");
    window_.push_back(id);
    route(takeNewText(false), out);
    return out;
}

std::vector<StreamText> StreamDecoder::finish() {
    std::vector<StreamText> out;
    route(takeNewText(true), out);
    flushTagHoldback(out);
    window_.clear();
    contextCount_ = 0;
    contextText_.clear();
    kind_ = options_.startsInReasoning ? StreamText::Kind::Reasoning : StreamText::Kind::Answer;
    return out;
}

std::string StreamDecoder::takeNewText(bool force) {
    const std::size_t pending = window_.size() - contextCount_;
    if (pending == 0) return {};
    // The window holds no special token but the ones to show, which decoding must then keep.
    const std::string full = tokenizer_.decode(window_, shownSpecial_.empty());
    const bool complete = full.size() > contextText_.size() && full.starts_with(contextText_) &&
                          !full.ends_with(utf8::kReplacementCharacter);
    if (!force && !complete && pending < kMostTokensPerCharacter) return {};
    // Normally the new text simply extends the context's; if a decoder rewrote the end of the context
    // (it cannot be taken back), only what lies past the shared beginning is new.
    const auto shared = std::mismatch(full.begin(), full.end(), contextText_.begin(), contextText_.end()).first;
    std::string fresh(shared, full.end());
    // The emitted ids become the context of the next ones.
    window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(contextCount_));
    contextCount_ = window_.size();
    contextText_ = tokenizer_.decode(window_, shownSpecial_.empty());
    return fresh;
}

void StreamDecoder::route(std::string text, std::vector<StreamText>& out) {
    // With think tags in the vocabulary, push() sees them as ids; otherwise they arrive as text.
    if (thinkOpenId_ && thinkCloseId_) {
        append(out, std::move(text));
        return;
    }
    tagHoldback_ += text;
    for (;;) {
        const std::string_view tag = inReasoning() ? kThinkClose : kThinkOpen;
        const std::size_t at = tagHoldback_.find(tag);
        if (at == std::string::npos) break;
        append(out, tagHoldback_.substr(0, at));
        tagHoldback_.erase(0, at + tag.size());
        switchKind();
    }
    const std::size_t keep = partialTagAtEnd(tagHoldback_, inReasoning() ? kThinkClose : kThinkOpen);
    append(out, tagHoldback_.substr(0, tagHoldback_.size() - keep));
    tagHoldback_.erase(0, tagHoldback_.size() - keep);
}

void StreamDecoder::flushTagHoldback(std::vector<StreamText>& out) {
    append(out, std::move(tagHoldback_));
    tagHoldback_.clear();
}

void StreamDecoder::switchKind() {
    kind_ = inReasoning() ? StreamText::Kind::Answer : StreamText::Kind::Reasoning;
}

void StreamDecoder::append(std::vector<StreamText>& out, std::string text) const {
    if (text.empty()) return;
    if (!out.empty() && out.back().kind == kind_)
        out.back().text += text;
    else
        out.push_back({kind_, std::move(text)});
}

}  // namespace tandem::text
