#include "text/tiktoken_loader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <unordered_map>

#include "io/text_file.h"
#include "tandem/error.h"
#include "text/byte_level_alphabet.h"
#include "text/text_chunks.h"
#include "text/tiktoken_pattern.h"

namespace tandem::text {
namespace {

constexpr int kReservedSpecialTokens = 256;  // TikTokenTokenizer.num_reserved_special_tokens

// A line of a file, shown in an error: printable ASCII as it is, other bytes as \xNN, cut short.
std::string shown(std::string_view line) {
    std::string out;
    for (const char ch : line.substr(0, 60)) {
        const auto b = static_cast<unsigned char>(ch);
        if (b >= 0x20 && b < 0x7F) {
            out += ch;
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", b);
            out += hex;
        }
    }
    if (line.size() > 60) out += "...";
    return out;
}

// Standard base64 with its padding, strictly: nullopt for anything else.
std::optional<std::string> decodeBase64(std::string_view text) {
    static const std::array<int, 256> value = [] {
        std::array<int, 256> v{};
        v.fill(-1);
        const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (std::size_t i = 0; i < alphabet.size(); ++i) v[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
        return v;
    }();
    if (text.empty() || text.size() % 4 != 0) return std::nullopt;
    const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        std::uint32_t group = 0;
        const bool last = i + 4 == text.size();
        for (std::size_t k = 0; k < 4; ++k) {
            const bool pad = last && k >= 4 - padding;
            const int v = pad ? 0 : value[static_cast<unsigned char>(text[i + k])];
            if (v < 0) return std::nullopt;
            group = (group << 6) | static_cast<std::uint32_t>(v);
        }
        const std::size_t bytes = last ? 3 - padding : 3;
        for (std::size_t k = 0; k < bytes; ++k) out += static_cast<char>((group >> (16 - 8 * k)) & 0xFF);
    }
    return out;
}

bool isAsciiSpace(char ch) { return ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f'; }

// The whitespace-separated fields of a line, as Python's bytes.split() cuts them.
std::vector<std::string_view> fieldsOf(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && isAsciiSpace(line[i])) ++i;
        const std::size_t start = i;
        while (i < line.size() && !isAsciiSpace(line[i])) ++i;
        if (i > start) fields.push_back(line.substr(start, i - start));
    }
    return fields;
}

// A Python string literal at `i` of `code` (raw ones only: others would need their escapes undone).
std::optional<std::string> rawStringLiteral(std::string_view code, std::size_t& i) {
    if (i >= code.size() || (code[i] != 'r' && code[i] != 'R')) return std::nullopt;
    std::size_t j = i + 1;
    if (j >= code.size() || (code[j] != '"' && code[j] != '\'')) return std::nullopt;
    const std::string_view quote = code.substr(j, 3) == std::string_view("\"\"\"") || code.substr(j, 3) == "'''"
                                       ? code.substr(j, 3)
                                       : code.substr(j, 1);
    j += quote.size();
    std::string value;
    while (j < code.size() && code.substr(j, quote.size()) != quote) {
        if (quote.size() == 1 && code[j] == '\n') return std::nullopt;
        // In a raw string a backslash keeps the character after it (even a quote) and itself.
        if (code[j] == '\\' && j + 1 < code.size()) value += code[j++];
        value += code[j++];
    }
    if (j >= code.size()) return std::nullopt;
    i = j + quote.size();
    return value;
}

void skipSpaceAndComments(std::string_view code, std::size_t& i) {
    while (i < code.size()) {
        if (code[i] == '#') {
            while (i < code.size() && code[i] != '\n') ++i;
        } else if (code[i] == ' ' || code[i] == '\t' || code[i] == '\n' || code[i] == '\r' || code[i] == '\\') {
            ++i;
        } else {
            break;
        }
    }
}

bool consume(std::string_view code, std::size_t& i, std::string_view token) {
    skipSpaceAndComments(code, i);
    if (code.substr(i, token.size()) != token) return false;
    i += token.size();
    return true;
}

struct SpecialToken {
    int id;
    std::string content;
    bool special;
};

// added_tokens_decoder: {"163584": {"content": "[BOS]", "special": true, ...}, ...}.
std::vector<SpecialToken> namedSpecialTokens(const Json& config, const std::string& where) {
    std::vector<SpecialToken> tokens;
    const auto it = config.find("added_tokens_decoder");
    if (it == config.end() || it->is_null()) return tokens;
    if (!it->is_object()) throwMalformed(where + ".added_tokens_decoder", "expected an object of id -> token");
    for (const auto& [key, entry] : it->items()) {
        const std::string at = where + ".added_tokens_decoder[\"" + key + "\"]";
        long long id = -1;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > kMaxTokenId)
            throwMalformed(at, "the key must be a token id from 0 to " + std::to_string(kMaxTokenId));
        tokens.push_back({static_cast<int>(id), stringField(entry, "content", at), boolField(entry, "special", at, true)});
        if (tokens.back().content.empty()) throwMalformed(at + ".content", "must not be empty");
    }
    return tokens;
}

// tokenization_kimi.py (or whichever module auto_map names), if the folder has it: its pat_str must be
// the pattern Tandem knows, or text would be split differently than the model was trained on.
void checkPatternOfCode(const std::filesystem::path& modelDir, const Json& config) {
    std::string module = "tokenization_kimi";
    if (const auto map = config.find("auto_map"); map != config.end() && map->is_object()) {
        const auto tokenizer = map->find("AutoTokenizer");
        if (tokenizer != map->end() && tokenizer->is_array() && !tokenizer->empty() && (*tokenizer)[0].is_string()) {
            // "module.Class", or "owner/repo--module.Class" for code kept in another repository.
            std::string name = (*tokenizer)[0].get<std::string>();
            if (const auto repo = name.find("--"); repo != std::string::npos) name.erase(0, repo + 2);
            module = name.substr(0, name.rfind('.'));
        }
    }
    // Only a file of this folder is read.
    if (module.empty() || module.find_first_of("/\\") != std::string::npos || module.starts_with('.')) return;
    const std::filesystem::path codePath = modelDir / (module + ".py");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(codePath, ec)) return;
    const auto pattern = pythonPatternOf(io::readRegularFile(codePath));
    if (pattern && *pattern != kKimiPattern)
        throw Error(codePath.string() + ": its pat_str is not the pre-tokenization pattern of Kimi-K2's tokenizer, the "
                                        "only tiktoken pattern Tandem knows, so Tandem would split text differently "
                                        "than the model was trained on; please report this model");
}

std::shared_ptr<const Tokenizer::Impl> buildTokenizer(const std::vector<std::string>& ranks, const std::string& ranksSource,
                                                      const Json& config, const std::string& configSource) {
    if (!config.is_object()) throwMalformed(configSource, "expected a JSON object at the top level");
    if (const std::string cls = stringField(config, "tokenizer_class", configSource, "TikTokenTokenizer");
        cls != "TikTokenTokenizer")
        throwMalformed(configSource + ".tokenizer_class",
                       "is '" + cls + "'; Tandem reads a tiktoken.model with the TikTokenTokenizer of Kimi-K2 and "
                                      "Moonlight only, whose pre-tokenization pattern it knows");

    // Raw bytes -> rank, for the splits; every single byte must be a token, since encoding starts from them.
    std::unordered_map<std::string_view, int> rankOf;
    rankOf.reserve(ranks.size());
    int count = 0;
    for (std::size_t r = 0; r < ranks.size(); ++r)
        if (!ranks[r].empty()) {
            rankOf.emplace(ranks[r], static_cast<int>(r));
            ++count;
        }
    for (int b = 0; b < 256; ++b)
        if (const char byte = static_cast<char>(b); !rankOf.contains(std::string_view(&byte, 1)))
            throw Error(ranksSource + " has no token for the single byte " + shown(std::string_view(&byte, 1)) +
                        "; a tiktoken vocabulary needs one for each of the 256 bytes. The file is damaged or not a "
                        "tiktoken vocabulary");

    std::vector<BpeMerge> merges;
    std::vector<std::string> mapped(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        const std::string_view token = ranks[r];
        byte_level::appendMapped(mapped[r], token);
        for (std::size_t cut = 1; cut < token.size(); ++cut) {
            const auto left = rankOf.find(token.substr(0, cut));
            if (left == rankOf.end()) continue;
            const auto right = rankOf.find(token.substr(cut));
            if (right == rankOf.end()) continue;
            merges.push_back({left->second, right->second, static_cast<int>(r), static_cast<std::uint32_t>(r)});
        }
    }

    // The 256 ids after the ranks are special, named by added_tokens_decoder or "<|reserved_token_ID|>";
    // the file may name others too.
    std::vector<SpecialToken> named = namedSpecialTokens(config, configSource);
    std::vector<AddedToken> added;
    std::unordered_map<int, std::size_t> byId;
    for (const SpecialToken& t : named) {
        if (static_cast<std::size_t>(t.id) < ranks.size() && !ranks[static_cast<std::size_t>(t.id)].empty())
            throwMalformed(configSource + ".added_tokens_decoder",
                           "gives the special token '" + t.content + "' the id " + std::to_string(t.id) + ", which " +
                               ranksSource + " gives to the token '" + shown(ranks[static_cast<std::size_t>(t.id)]) +
                               "'; the files do not belong together");
        if (byId.contains(t.id))
            throwMalformed(configSource + ".added_tokens_decoder", "names the id " + std::to_string(t.id) + " twice");
        byId.emplace(t.id, added.size());
        added.push_back({.id = t.id, .content = t.content, .special = t.special});
    }
    for (int id = count; id < count + kReservedSpecialTokens; ++id)
        if (!byId.contains(id))
            added.push_back({.id = id, .content = "<|reserved_token_" + std::to_string(id) + "|>", .special = true});
    for (const AddedToken& t : added)
        if (static_cast<std::size_t>(t.id) < ranks.size() && !ranks[static_cast<std::size_t>(t.id)].empty())
            throw Error(ranksSource + " leaves gaps between its ranks, so the reserved special token id " +
                        std::to_string(t.id) + " (its number of ranks plus one of 0..255) is also a rank; the file "
                        "is damaged or not Kimi's");

    auto impl = std::make_shared<Tokenizer::Impl>();
    impl->source = ranksSource;
    const std::string where = ranksSource + " (Kimi's pattern)";
    Json split = Json::object();
    split["type"] = "Split";
    split["pattern"]["Regex"] = tiktokenPatternToPcre2(kKimiPattern, where);
    split["behavior"] = "Isolated";
    Json byteLevel = Json::object();
    byteLevel["type"] = "ByteLevel";
    byteLevel["add_prefix_space"] = false;
    byteLevel["use_regex"] = false;
    Json sequence = Json::object();
    sequence["type"] = "Sequence";
    sequence["pretokenizers"] = Json::array({split, byteLevel});
    impl->preTokenizer = makePreTokenizer(sequence, where);
    impl->model = std::make_unique<BpeModel>(std::move(mapped), merges, /*ignoreMerges=*/true);
    impl->decoder = makeDecoder(Json{{"type", "ByteLevel"}}, where);
    impl->vocabSize = static_cast<int>(ranks.size());
    for (const AddedToken& t : added) impl->vocabSize = std::max(impl->vocabSize, t.id + 1);
    impl->addedTokens = std::make_unique<AddedVocabulary>(std::move(added), nullptr);
    impl->chunking = kKimiChunkLimits;
    impl->byteLevelAddedTokens = true;
    return impl;
}

}  // namespace

std::vector<std::string> parseTiktokenRanks(std::string_view text, const std::string& source) {
    std::vector<std::string> ranks;
    std::vector<std::size_t> lineOfRank;  // 0 where no line has given the rank yet
    std::unordered_map<std::string, std::size_t> lineOfToken;
    std::size_t lineNumber = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        // Lines end at "\n", "\r\n" or "\r", as Python's bytes.splitlines() has them.
        std::size_t end = pos;
        while (end < text.size() && text[end] != '\n' && text[end] != '\r') ++end;
        const std::string_view line = text.substr(pos, end - pos);
        pos = end + (text.substr(end, 2) == "\r\n" ? 2 : 1);
        ++lineNumber;
        if (line.empty()) continue;

        const std::string at = source + " line " + std::to_string(lineNumber);
        const auto fields = fieldsOf(line);
        if (fields.size() != 2)
            throw Error(at + ": expected a base64 token and its rank separated by a space, got '" + shown(line) +
                        "'; the file is damaged or not a tiktoken vocabulary");
        const auto token = decodeBase64(fields[0]);
        if (!token)
            throw Error(at + ": '" + shown(fields[0]) + "' is not a base64 token; the file is damaged");
        long long rank = -1;
        const auto [rankEnd, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), rank);
        if (ec != std::errc() || rankEnd != fields[1].data() + fields[1].size() || rank < 0 || rank > kMaxTokenId)
            throw Error(at + ": the rank '" + shown(fields[1]) + "' is not a whole number from 0 to " +
                        std::to_string(kMaxTokenId) + "; the file is damaged");
        const auto r = static_cast<std::size_t>(rank);
        if (r >= ranks.size()) {
            ranks.resize(r + 1);
            lineOfRank.resize(r + 1);
        }
        if (lineOfRank[r] != 0)
            throw Error(at + ": the rank " + std::to_string(rank) + " was already given on line " +
                        std::to_string(lineOfRank[r]) + "; every token needs its own rank (it is the token's id)");
        if (const auto [it, fresh] = lineOfToken.emplace(*token, lineNumber); !fresh)
            throw Error(at + ": the token '" + shown(*token) + "' was already given on line " + std::to_string(it->second) +
                        "; the file is damaged");
        ranks[r] = *token;
        lineOfRank[r] = lineNumber;
    }
    if (ranks.empty()) throw Error(source + " holds no tokens; the download may be incomplete: fetch tiktoken.model again");
    return ranks;
}

std::optional<std::string> pythonPatternOf(std::string_view code) {
    // The assignment "pat_str = ", not a use such as "self.pat_str" or a comparison.
    std::size_t i = 0;
    for (;; ++i) {
        i = code.find("pat_str", i);
        if (i == std::string_view::npos) return std::nullopt;
        if (i > 0 && (std::isalnum(static_cast<unsigned char>(code[i - 1])) || code[i - 1] == '_' || code[i - 1] == '.'))
            continue;
        std::size_t j = i + 7;
        if (consume(code, j, "=") && code.substr(j, 1) != "=") {
            i = j;
            break;
        }
    }
    if (!(consume(code, i, "\"|\".join(") || consume(code, i, "'|'.join("))) return std::nullopt;
    const bool list = consume(code, i, "[");
    if (!list && !consume(code, i, "(")) return std::nullopt;
    const std::string_view close = list ? "]" : ")";
    std::string joined;
    bool first = true;
    while (!consume(code, i, close)) {
        // One item: adjacent literals, perhaps in parentheses, are one string.
        const bool parenthesized = consume(code, i, "(");
        std::string item;
        bool any = false;
        for (;;) {
            skipSpaceAndComments(code, i);
            const auto literal = rawStringLiteral(code, i);
            if (!literal) break;
            item += *literal;
            any = true;
        }
        if (!any || (parenthesized && !consume(code, i, ")"))) return std::nullopt;
        if (!first) joined += '|';
        joined += item;
        first = false;
        if (!consume(code, i, ",")) {
            if (!consume(code, i, close)) return std::nullopt;
            break;
        }
    }
    if (first) return std::nullopt;
    return joined;
}

std::shared_ptr<const Tokenizer::Impl> loadTiktokenTokenizer(const std::filesystem::path& modelDir) {
    const std::filesystem::path ranksPath = modelDir / "tiktoken.model";
    const std::filesystem::path configPath = modelDir / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::exists(configPath, ec))
        throw Error(modelDir.string() + " has tiktoken.model but no tokenizer_config.json, which names its special tokens "
                                        "([BOS], [EOS], <|im_end|>, ...); copy it from the model's download");
    const std::string ranksSource = ranksPath.string();
    const std::string configSource = configPath.string();
    Json config;
    try {
        config = io::parseJson<Json>(io::readRegularFile(configPath), configSource);
    } catch (const Json::exception& e) {
        throw Error(configSource + " is not valid JSON (" + e.what() +
                    "); the download may be incomplete: fetch the model's tokenizer_config.json again");
    }
    const std::vector<std::string> ranks = parseTiktokenRanks(io::readRegularFile(ranksPath), ranksSource);
    checkPatternOfCode(modelDir, config);
    try {
        return buildTokenizer(ranks, ranksSource, config, configSource);
    } catch (const Json::exception& e) {
        throw Error(configSource + " is malformed (" + e.what() + "); fetch the model's tokenizer_config.json again");
    }
}

}  // namespace tandem::text
