#include "text/gguf_tokenizer.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "text/jinja/template.h"
#include "text/utf8.h"

namespace tandem::text {

namespace {

using nlohmann::ordered_json;

// llama.cpp's token types (tokenizer.ggml.token_type). Unused ones pad the list to the embedding's
// rows; like the Hugging Face original, the tokenizer leaves them out.
constexpr std::int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

ordered_json split(const std::string& regex) {
    return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

const std::string kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (gpt-oss, "gpt-4o" in llama.cpp): words split where lower case turns to upper case, with their
// contraction attached; digits in runs of up to three; as the Hugging Face tokenizer.json of gpt-oss has it.
const std::string kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek-V2's cased-letter class; three Greek Extended range ends are escaped because their
// characters change under NFC, which would turn the ranges around.
const std::string kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
    "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d"
    "\u1f5f-\\x{1F7D}\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\\x{1FD3}\u1fd6-\\x{1FDB}"
    "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128"
    "\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4"
    "\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf"
    "\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";

struct PreTokenizer {
    ordered_json preTokenizer;
    ordered_json normalizer;
    bool ignoreMerges = false;
};

ordered_json byteLevel(bool trimOffsets) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", trimOffsets}, {"use_regex", false}};
}

std::optional<PreTokenizer> preTokenizerFor(const std::string& name) {
    auto sequence = [](std::vector<ordered_json> steps) {
        ordered_json s = {{"type", "Sequence"}, {"pretokenizers", ordered_json::array()}};
        for (auto& step : steps) s["pretokenizers"].push_back(std::move(step));
        return s;
    };
    if (name == "qwen2")
        return PreTokenizer{sequence({split(kQwen2), byteLevel(false)}), {{"type", "NFC"}}, false};
    // glm4: GLM-4.5's, which llama.cpp splits with Llama 3's expression and looks words up whole first.
    if (name == "llama-bpe" || name == "llama3" || name == "glm4")
        return PreTokenizer{sequence({split(kLlama3), byteLevel(true)}), nullptr, true};
    if (name == "gpt-4o") return PreTokenizer{sequence({split(kGpt4o), byteLevel(true)}), nullptr, false};
    if (name == "deepseek-v3")
        return PreTokenizer{sequence({split(R"(\p{N}{1,3})"), split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
                                      split(kDeepseekV3Words), byteLevel(false)}),
                            nullptr, false};
    if (name == "deepseek-llm")
        return PreTokenizer{sequence({split("[\r\n]"), split(kDeepseekLlmLetters),
                                      split("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"),
                                      split("\\s+$"), split("[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"),
                                      split("\\p{N}+"), byteLevel(false)}),
                            nullptr, false};
    return std::nullopt;
}

class Keys {
public:
    explicit Keys(const io::GgufModel& g) : g_(g) {}

    const io::GgufValue& get(const std::string& key) const {
        const auto* v = g_.find(key);
        if (!v) fail(key, "is missing; the file has no tokenizer Tandem can use");
        return *v;
    }
    const std::vector<io::GgufValue>& array(const std::string& key, io::GgufValueType itemType, bool integers) const {
        const auto& v = get(key);
        const bool ok = v.type == io::GgufValueType::Array &&
                        (integers ? (v.items.empty() || v.items.front().isInteger()) : v.itemType == itemType);
        if (!ok) fail(key, "is not an array of the expected type");
        if (itemType == io::GgufValueType::String)
            for (std::size_t i = 0; i < v.items.size(); ++i)
                if (utf8::firstInvalidOffset(v.items[i].string) != utf8::kValid)
                    fail(key, "entry " + std::to_string(i) + " is not valid UTF-8 text");
        return v.items;
    }
    std::optional<std::int64_t> id(const std::string& key, std::size_t vocab) const {
        const auto* v = g_.find(key);
        if (!v) return std::nullopt;
        if (!v->isInteger() || v->integer < 0 || static_cast<std::size_t>(v->integer) >= vocab)
            fail(key, "is not a token id of the vocabulary");
        return v->integer;
    }
    bool flag(const std::string& key, bool fallback) const {
        const auto* v = g_.find(key);
        if (!v) return fallback;
        if (v->type != io::GgufValueType::Bool) fail(key, "is not a boolean");
        return v->boolean;
    }
    std::string string(const std::string& key, const std::string& fallback) const {
        const auto* v = g_.find(key);
        if (!v) return fallback;
        if (v->type != io::GgufValueType::String) fail(key, "is not a string");
        if (utf8::firstInvalidOffset(v->string) != utf8::kValid) fail(key, "is not valid UTF-8 text");
        return v->string;
    }
    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw Error(g_.path().string() + ": metadata '" + key + "' " + what);
    }

private:
    const io::GgufModel& g_;
};

ordered_json postProcessor(const std::vector<std::string>& tokens, std::optional<std::int64_t> bos,
                           std::optional<std::int64_t> eos, bool addBos, bool addEos) {
    if (!(addBos && bos) && !(addEos && eos))
        return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
    auto special = [&](std::int64_t id, int typeId) {
        return ordered_json{{"SpecialToken", {{"id", tokens[static_cast<std::size_t>(id)]}, {"type_id", typeId}}}};
    };
    auto sequence = [](const char* id, int typeId) { return ordered_json{{"Sequence", {{"id", id}, {"type_id", typeId}}}}; };
    ordered_json single = ordered_json::array(), pair = ordered_json::array(), specials = ordered_json::object();
    for (int part = 0; part < 2; ++part) {
        if (addBos && bos) (part ? pair : single).push_back(special(*bos, 0));
        (part ? pair : single).push_back(sequence("A", 0));
        if (addEos && eos) (part ? pair : single).push_back(special(*eos, 0));
    }
    if (addBos && bos) pair.push_back(special(*bos, 1));
    pair.push_back(sequence("B", 1));
    if (addEos && eos) pair.push_back(special(*eos, 1));
    for (const auto id : {addBos ? bos : std::nullopt, addEos ? eos : std::nullopt})
        if (id) {
            const std::string& t = tokens[static_cast<std::size_t>(*id)];
            specials[t] = {{"id", t}, {"ids", {*id}}, {"tokens", {t}}};
        }
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

// SentencePiece's BPE joins two adjacent pieces whenever the result is a piece, the highest-scoring
// result first. As a Hugging Face BPE model that is a merge list: every split of a piece into two
// pieces is a merge, ranked by the piece's score (higher first), ties by the piece's id and then the
// parts' ids -- the order Hugging Face's SentencePiece converter produces. Only normal pieces take
// part: SentencePiece never builds unknown, control, byte or user-defined pieces by merging.
ordered_json spmMerges(const std::vector<std::string>& tokens, const std::vector<std::int64_t>& types,
                       const std::vector<double>& scores) {
    std::unordered_map<std::string_view, std::size_t> normal;
    for (std::size_t i = 0; i < tokens.size(); ++i)
        if (types[i] == kNormal) normal.try_emplace(tokens[i], i);
    struct Merge {
        double score;
        std::size_t merged, left, right;
        std::string_view leftText, rightText;
    };
    std::vector<Merge> merges;
    for (const auto& [piece, id] : normal) {
        // Split between characters, never inside one's UTF-8 bytes.
        for (std::size_t cut = 1; cut < piece.size(); ++cut) {
            if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;
            const auto left = normal.find(piece.substr(0, cut)), right = normal.find(piece.substr(cut));
            if (left != normal.end() && right != normal.end())
                merges.push_back({scores[id], id, left->second, right->second, left->first, right->first});
        }
    }
    std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
        if (a.score != b.score) return a.score > b.score;
        return std::tie(a.merged, a.left, a.right) < std::tie(b.merged, b.left, b.right);
    });
    ordered_json out = ordered_json::array();
    for (const auto& m : merges) out.push_back({m.leftText, m.rightText});
    return out;
}

// An ordered_json object looks keys up one by one, which makes inserting a 150k-token vocabulary quadratic;
// the caller has checked that `key` is new, so it goes straight to the end.
void appendUnique(ordered_json& object, const std::string& key, std::size_t id) {
    object.get_ref<ordered_json::object_t&>().emplace_back(key, id);
}

struct Vocabulary {
    std::vector<std::string> tokens;
    std::vector<std::int64_t> types;
};

Vocabulary readVocabulary(const Keys& keys, const io::GgufModel& g) {
    Vocabulary v;
    const auto& tokenValues = keys.array("tokenizer.ggml.tokens", io::GgufValueType::String, false);
    v.tokens.reserve(tokenValues.size());
    for (const auto& t : tokenValues) v.tokens.push_back(t.string);
    v.types.assign(v.tokens.size(), kNormal);
    if (g.find("tokenizer.ggml.token_type")) {
        const auto& typeValues = keys.array("tokenizer.ggml.token_type", io::GgufValueType::I32, true);
        if (typeValues.size() != v.tokens.size())
            keys.fail("tokenizer.ggml.token_type", "has " + std::to_string(typeValues.size()) + " entries for " +
                                                       std::to_string(v.tokens.size()) + " tokens");
        for (std::size_t i = 0; i < v.types.size(); ++i) v.types[i] = typeValues[i].integer;
    }
    return v;
}

ordered_json addedToken(std::size_t id, const std::string& content, bool special) {
    return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},   {"normalized", false}, {"special", special}};
}

// Byte-level BPE: the tokens and merges as they are, the pre-tokenizer that tokenizer.ggml.pre names.
ordered_json byteLevelTokenizer(const Keys& keys, const Vocabulary& v) {
    const std::string preName = keys.string("tokenizer.ggml.pre", "default");
    const auto pre = preTokenizerFor(preName);
    if (!pre)
        keys.fail("tokenizer.ggml.pre", "names the pre-tokenizer '" + preName +
                                            "', which Tandem does not know (it knows qwen2, deepseek-v3, deepseek-llm, "
                                            "llama-bpe, llama3, glm4, gpt-4o); use the Hugging Face folder of this model");
    ordered_json vocab = ordered_json::object(), added = ordered_json::array();
    std::unordered_set<std::string_view> seen;
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
        if (v.types[i] == kControl || v.types[i] == kUserDefined)
            added.push_back(addedToken(i, v.tokens[i], v.types[i] == kControl));
        else if (v.types[i] != kUnused && seen.insert(v.tokens[i]).second)
            appendUnique(vocab, v.tokens[i], i);
    }
    ordered_json merges = ordered_json::array();
    for (const auto& m : keys.array("tokenizer.ggml.merges", io::GgufValueType::String, false)) {
        const auto space = m.string.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == m.string.size())
            keys.fail("tokenizer.ggml.merges", "holds '" + m.string + "', which is not two tokens separated by a space");
        merges.push_back({m.string.substr(0, space), m.string.substr(space + 1)});
    }
    return {
        {"added_tokens", added},
        {"normalizer", pre->normalizer},
        {"pre_tokenizer", pre->preTokenizer},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
          {"ignore_merges", pre->ignoreMerges}, {"vocab", vocab}, {"merges", merges}}},
    };
}

// SentencePiece BPE ("llama": Llama 2, Mistral, Mixtral) in the layout of Hugging Face's converted
// tokenizer.json: every piece in the vocabulary, "▁" for spaces (and before the text unless
// add_space_prefix is false), byte pieces for characters the vocabulary lacks.
ordered_json sentencePieceTokenizer(const Keys& keys, const Vocabulary& v) {
    const auto& scoreValues = keys.array("tokenizer.ggml.scores", io::GgufValueType::F32, false);
    if (scoreValues.size() != v.tokens.size())
        keys.fail("tokenizer.ggml.scores", "has " + std::to_string(scoreValues.size()) + " entries for " +
                                               std::to_string(v.tokens.size()) + " tokens");
    std::vector<double> scores;
    scores.reserve(scoreValues.size());
    for (const auto& s : scoreValues) scores.push_back(s.real);

    ordered_json vocab = ordered_json::object(), added = ordered_json::array();
    std::unordered_set<std::string_view> seen;
    std::optional<std::int64_t> unk = keys.id("tokenizer.ggml.unknown_token_id", v.tokens.size());
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
        const auto type = v.types[i];
        if (type == kUnknown && !unk) unk = static_cast<std::int64_t>(i);
        if (type == kUnknown || type == kControl || type == kUserDefined)
            added.push_back(addedToken(i, v.tokens[i], type != kUserDefined));
        if (seen.insert(v.tokens[i]).second) appendUnique(vocab, v.tokens[i], i);
    }
    if (std::none_of(v.types.begin(), v.types.end(), [](std::int64_t t) { return t == kByte; }))
        keys.fail("tokenizer.ggml.token_type", "marks no byte pieces (<0x00>..<0xFF>); Tandem imports SentencePiece "
                                               "vocabularies with byte fallback. Use the Hugging Face folder of this model");

    const std::string space = "\xE2\x96\x81";  // "▁"
    const bool spacePrefix = keys.flag("tokenizer.ggml.add_space_prefix", true);
    ordered_json normalizers = ordered_json::array();
    if (spacePrefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", space}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}});
    ordered_json decoders = ordered_json::array();
    decoders.push_back({{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}});
    decoders.push_back({{"type", "ByteFallback"}});
    decoders.push_back({{"type", "Fuse"}});
    if (spacePrefix)  // the space the normalizer put before the text
        decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    return {
        {"added_tokens", added},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
        {"pre_tokenizer", nullptr},
        {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr},
          {"unk_token", unk ? ordered_json(v.tokens[static_cast<std::size_t>(*unk)]) : ordered_json(nullptr)},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
          {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab},
          {"merges", spmMerges(v.tokens, v.types, scores)}}},
    };
}

}  // namespace

GgufTokenizerFiles ggufTokenizerFiles(const io::GgufModel& g) {
    const Keys keys(g);
    const auto& model = keys.get("tokenizer.ggml.model");
    if (model.type != io::GgufValueType::String) keys.fail("tokenizer.ggml.model", "is not a string");
    const bool sentencePiece = model.string == "llama";
    if (!sentencePiece && model.string != "gpt2")
        keys.fail("tokenizer.ggml.model",
                  "is '" + model.string +
                      "'; Tandem imports byte-level BPE ('gpt2': Qwen3, DeepSeek, Llama 3) and SentencePiece BPE "
                      "('llama': Mistral, Mixtral) tokenizers. Use the Hugging Face folder of this model");
    const Vocabulary v = readVocabulary(keys, g);
    const auto& tokens = v.tokens;
    ordered_json parts = sentencePiece ? sentencePieceTokenizer(keys, v) : byteLevelTokenizer(keys, v);

    const auto bos = keys.id("tokenizer.ggml.bos_token_id", tokens.size());
    const auto eos = keys.id("tokenizer.ggml.eos_token_id", tokens.size());
    const auto pad = keys.id("tokenizer.ggml.padding_token_id", tokens.size());
    // llama.cpp adds BOS for SentencePiece vocabularies unless told otherwise, as Hugging Face's do.
    const bool addBos = keys.flag("tokenizer.ggml.add_bos_token", sentencePiece);
    const bool addEos = keys.flag("tokenizer.ggml.add_eos_token", false);
    ordered_json post = postProcessor(tokens, bos, eos, addBos, addEos);
    if (sentencePiece && post["type"] != "TemplateProcessing") post = nullptr;

    ordered_json tokenizer = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", parts["added_tokens"]},
        {"normalizer", parts["normalizer"]},
        {"pre_tokenizer", parts["pre_tokenizer"]},
        {"post_processor", post},
        {"decoder", parts["decoder"]},
        {"model", parts["model"]},
    };
    auto tokenOrNull = [&](std::optional<std::int64_t> id) {
        return id ? ordered_json(tokens[static_cast<std::size_t>(*id)]) : ordered_json(nullptr);
    };
    ordered_json config = {
        {"tokenizer_class", "PreTrainedTokenizerFast"},
        {"bos_token", tokenOrNull(bos)},
        {"eos_token", tokenOrNull(eos)},
        {"pad_token", tokenOrNull(pad)},
        {"add_bos_token", addBos},
        {"add_eos_token", addEos},
        {"clean_up_tokenization_spaces", false},
    };
    if (g.find("tokenizer.chat_template")) {
        // Parsed now, so a broken template fails the conversion instead of every chat with the store (a
        // hostile one that parses is stopped by the render's limits).
        const std::string chatTemplate = keys.string("tokenizer.chat_template", "");
        const jinja::Template parsed(chatTemplate, g.path().string() + ": metadata 'tokenizer.chat_template'");
        config["chat_template"] = chatTemplate;
    }
    return {tokenizer.dump(), config.dump(2)};
}

}  // namespace tandem::text
