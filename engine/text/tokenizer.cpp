// Encoding and decoding with the parts of a loaded tokenizer.
#include "tandem/tokenizer.h"

#include <cstdio>

#include "text/byte_level_alphabet.h"
#include "text/tokenizer_impl.h"
#include "text/utf8.h"

namespace tandem::text {

namespace {

// Appends the ids of one stretch of text; `atStart` says whether it begins the whole text.
void encodeStretch(const Tokenizer::Impl& t, std::string_view text, bool atStart, std::vector<int>& ids) {
    const auto encodeWords = [&](const Piece& piece) {
        if (!t.preTokenizer) {
            t.model->encodeWord(piece.text, ids);
            return;
        }
        t.preTokenizer->split(piece, [&](const Piece& word) { t.model->encodeWord(word.text, ids); });
    };

    // Added tokens are cut out twice: those matched in the original text first, then, after each
    // remaining stretch is normalized, those matched in normalized text.
    std::string normalized;
    for (const auto& span : t.addedTokens->split(text, false)) {
        if (span.id) {
            ids.push_back(*span.id);
            continue;
        }
        std::string_view stretch = text.substr(span.start, span.end - span.start);
        if (t.normalizer) {
            normalized.assign(stretch);
            t.normalizer->normalize(normalized);
            stretch = normalized;
        }
        for (const auto& inner : t.addedTokens->split(stretch, true)) {
            if (inner.id)
                ids.push_back(*inner.id);
            else
                encodeWords(Piece{stretch.substr(inner.start, inner.end - inner.start),
                                  atStart && span.start == 0 && inner.start == 0});
        }
    }
}

}  // namespace

std::vector<int> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const {
    const Impl& t = *impl_;
    if (const std::size_t bad = utf8::firstInvalidOffset(text); bad != utf8::kValid) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
        throw Error("cannot tokenize: the text is not valid UTF-8 (byte " + std::string(byte) + " at offset " +
                    std::to_string(bad) + "); convert the input to UTF-8 first");
    }

    std::vector<int> ids;
    ids.reserve(text.size() / 3 + 4);
    if (t.chunking)
        forEachChunk(text, *t.chunking, [&](std::string_view piece, bool atStart) { encodeStretch(t, piece, atStart, ids); });
    else
        encodeStretch(t, text, true, ids);
    if (addSpecialTokens && t.postProcessor) t.postProcessor->process(ids);
    return ids;
}

std::string Tokenizer::decode(std::span<const int> ids, bool skipSpecialTokens) const {
    const Impl& t = *impl_;
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int id : ids) {
        if (const AddedToken* added = t.addedTokens->find(id)) {
            if (skipSpecialTokens && added->special) continue;
            if (t.byteLevelAddedTokens) {
                byte_level::appendMapped(tokens.emplace_back(), added->content);
            } else {
                tokens.push_back(added->content);
            }
            continue;
        }
        const std::string* token = t.model->idToToken(id);
        if (!token)
            throw Error("cannot decode token id " + std::to_string(id) + ": the vocabulary of " + t.source +
                        " has ids 0 to " + std::to_string(t.vocabSize - 1) +
                        "; the ids were made for a different model or are corrupt");
        tokens.push_back(*token);
    }
    if (!t.decoder) {
        // Without a decoder Hugging Face joins the tokens with spaces.
        std::string joined;
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            if (i) joined += ' ';
            joined += tokens[i];
        }
        return joined;
    }
    t.decoder->decodeChain(tokens);
    std::string text;
    for (const std::string& token : tokens) text += token;
    return text;
}

std::optional<int> Tokenizer::tokenToId(std::string_view token) const {
    if (const auto id = impl_->addedTokens->idOf(token)) return id;
    return impl_->model->tokenToId(token);
}

std::optional<std::string> Tokenizer::idToToken(int id) const {
    if (const AddedToken* added = impl_->addedTokens->find(id)) return added->content;
    if (const std::string* token = impl_->model->idToToken(id)) return *token;
    return std::nullopt;
}

bool Tokenizer::isSpecial(int id) const {
    const AddedToken* added = impl_->addedTokens->find(id);
    return added && added->special;
}

int Tokenizer::vocabSize() const { return impl_->vocabSize; }

}  // namespace tandem::text
