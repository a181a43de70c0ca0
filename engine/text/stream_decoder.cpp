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

// harmony (gpt-oss) markers.
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
// A real header ("<|channel|>commentary to=functions.NAME <|constrain|>json") is a dozen tokens or so; a
// longer run without <|message|> is text written without harmony's framing and is shown as answer.
constexpr std::size_t kLongestHeader = 64;

std::optional<int> specialId(const Tokenizer& tokenizer, std::string_view token) {
    const auto id = tokenizer.tokenToId(token);
    if (id && tokenizer.isSpecial(*id)) return id;
    return std::nullopt;
}

bool hasHarmonyTokens(const Tokenizer& tokenizer) {
    for (const std::string_view token : {kStart, kEnd, kMessage, kChannel})
        if (!specialId(tokenizer, token)) return false;
    return true;
}

// The word after `key` in a header, up to a space or the next marker.
std::string fieldAt(std::string_view header, std::size_t at, std::string_view key) {
    const std::string_view rest = header.substr(at + key.size());
    return std::string(rest.substr(0, std::min(rest.find(' '), rest.find('<'))));
}

// The channel: the last one named, since gpt-oss sometimes writes "<|channel|>commentary" (to=assistant)
// before the real one.
std::string headerChannel(std::string_view header) {
    const auto at = header.rfind(kChannel);
    return at == std::string_view::npos ? std::string() : fieldAt(header, at, kChannel);
}

// The recipient, "functions.f" in " to=functions.f" (role header) or "commentary to=functions.f" (channel header).
std::string headerRecipient(std::string_view header) {
    constexpr std::string_view key = "to=";
    for (std::size_t at = header.find(key); at != std::string_view::npos; at = header.find(key, at + 1))
        if (at == 0 || header[at - 1] == ' ' || header[at - 1] == '>') return fieldAt(header, at, key);
    return {};
}

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
      shownSpecial_(options_.shownSpecialTokens) {
    if (options_.harmonyChannels && hasHarmonyTokens(tokenizer_)) {
        harmony_ = HarmonyTokens{*specialId(tokenizer_, kStart), *specialId(tokenizer_, kEnd), *specialId(tokenizer_, kMessage),
                                 *specialId(tokenizer_, kChannel), specialId(tokenizer_, kConstrain),
                                 specialId(tokenizer_, kReturn), specialId(tokenizer_, kCall)};
        // The generation prompt ends with "<|start|>assistant": the model goes on with the header.
        inHeader_ = !options_.startsInReasoning;
    }
}

std::vector<StreamText> StreamDecoder::push(int id) {
    std::vector<StreamText> out;
    if (harmony_ && pushHarmony(id, out)) return out;
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
    if (harmony_ && inHeader_ && !headerAfterStart_) {
        // Text that never became a header: the model wrote without harmony's framing.
        const bool markers = std::any_of(headerIds_.begin(), headerIds_.end(), [this](int id) { return tokenizer_.isSpecial(id); });
        if (!markers && !headerIds_.empty()) giveUpHeader(out);
    }
    route(takeNewText(true), out);
    flushTagHoldback(out);
    resetWindow();
    kind_ = options_.startsInReasoning ? StreamText::Kind::Reasoning : StreamText::Kind::Answer;
    if (harmony_) {
        inHeader_ = !options_.startsInReasoning;
        headerAfterStart_ = false;
        headerIds_.clear();
        toTool_ = false;
    }
    return out;
}

bool StreamDecoder::pushHarmony(int id, std::vector<StreamText>& out) {
    const HarmonyTokens& h = *harmony_;
    const auto newHeader = [&](bool afterStart) {
        inHeader_ = true;
        headerAfterStart_ = afterStart;
        headerIds_.clear();
    };
    if (id == h.start) {
        endHarmonyMessage({}, out);  // an unfinished header before it was framing, and is dropped
        newHeader(true);
        return true;
    }
    if (id == h.end || id == h.returns || id == h.call) {
        endHarmonyMessage(id == h.end ? kEnd : id == h.returns ? kReturn : kCall, out);
        newHeader(false);
        return true;
    }
    if (id == h.message) {
        if (inHeader_) openHarmonyBody(out);
        return true;  // a stray one inside a body is hidden, as special tokens are
    }
    if (id == h.channel || id == h.constrain) {
        if (!inHeader_) {  // a header without <|end|><|start|> before it: the message ended
            endHarmonyMessage({}, out);
            newHeader(false);
        }
        headerIds_.push_back(id);
        return true;
    }
    if (!inHeader_) return false;
    if (tokenizer_.isSpecial(id)) return true;
    if (!tokenizer_.idToToken(id))
        throw Error("the generated token id " + std::to_string(id) + " is outside the tokenizer's vocabulary of " +
                    std::to_string(tokenizer_.vocabSize()) + " ids; the model and its tokenizer.json do not match");
    headerIds_.push_back(id);
    if (headerIds_.size() > kLongestHeader) giveUpHeader(out);
    return true;
}

void StreamDecoder::endHarmonyMessage(std::string_view terminator, std::vector<StreamText>& out) {
    if (inHeader_) return;
    route(takeNewText(true), out);
    flushTagHoldback(out);
    // A call's end is shown too (<|end|> when the next header came without one), so that a parser
    // knows where its arguments stop.
    if (toTool_) append(out, std::string(terminator.empty() ? kEnd : terminator));
    toTool_ = false;
    resetWindow();
}

void StreamDecoder::openHarmonyBody(std::vector<StreamText>& out) {
    const std::string header = tokenizer_.decode(headerIds_, false);
    const std::string channel = headerChannel(header);
    const std::string recipient = headerRecipient(header);
    toTool_ = !recipient.empty() && recipient != "assistant";
    kind_ = !toTool_ && channel == "analysis" ? StreamText::Kind::Reasoning : StreamText::Kind::Answer;
    // A call is shown whole, in the form the model wrote it; the role is the prompt's when the header
    // came right after it.
    if (toTool_) append(out, std::string(kStart) + (headerAfterStart_ ? "" : "assistant") + header + std::string(kMessage));
    inHeader_ = false;
    headerIds_.clear();
    resetWindow();
}

void StreamDecoder::giveUpHeader(std::vector<StreamText>& out) {
    std::vector<int> ids;
    for (const int id : headerIds_)
        if (!tokenizer_.isSpecial(id)) ids.push_back(id);
    headerIds_.clear();
    inHeader_ = false;
    toTool_ = false;
    kind_ = StreamText::Kind::Answer;
    resetWindow();
    window_ = std::move(ids);
    route(takeNewText(false), out);
}

void StreamDecoder::resetWindow() {
    window_.clear();
    contextCount_ = 0;
    contextText_.clear();
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
    // With think tags in the vocabulary, push() sees them as ids; otherwise they arrive as text. Harmony's
    // channels say what is reasoning.
    if ((thinkOpenId_ && thinkCloseId_) || harmony_) {
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

std::vector<int> harmonyEndOfTurnTokens(const Tokenizer& tokenizer) {
    std::vector<int> ids;
    if (!hasHarmonyTokens(tokenizer)) return ids;
    for (const std::string_view token : {kReturn, kCall})
        if (const auto id = specialId(tokenizer, token)) ids.push_back(*id);
    return ids;
}

}  // namespace tandem::text
