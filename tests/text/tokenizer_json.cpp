#include "tokenizer_json.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

namespace tandem::test {

Json fixtureTokenizerJson(const QString& fixture) {
    const QByteArray bytes = readFile(fixturePath(fixture) + "/tokenizer.json");
    if (bytes.isEmpty()) throw std::runtime_error("cannot read the tokenizer.json of " + fixture.toStdString());
    return Json::parse(bytes.constData(), bytes.constData() + bytes.size());
}

Json sentencePieceTokenizerJson(SentencePieceStyle style) {
    Json vocab = Json::object();
    const auto add = [&](const std::string& token) {
        if (!vocab.contains(token)) vocab[token] = static_cast<int>(vocab.size());
    };
    for (const char* special : {"<unk>", "<s>", "</s>"}) add(special);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        add(name);
    }
    for (const char* piece : {"▁", "h", "e", "l", "o", "w", "r", "d", "t", "c", "a", "f", "é", "x"}) add(piece);
    const std::vector<std::pair<std::string, std::string>> merges = {
        {"▁", "h"},  {"▁", "w"},   {"l", "l"},    {"h", "e"},   {"ll", "o"},   {"e", "llo"}, {"▁h", "ello"},
        {"o", "r"},  {"▁w", "or"}, {"l", "d"},    {"▁wor", "ld"}, {"▁", "t"},  {"▁t", "h"},  {"▁th", "e"},
        {"c", "a"},  {"ca", "f"},  {"caf", "é"},  {"▁", "caf"}, {"▁caf", "é"}, {"▁", "▁"},
    };
    for (const auto& [left, right] : merges) add(left + right);
    Json mergeList = Json::array();
    for (const auto& [left, right] : merges) mergeList.push_back(left + " " + right);

    const auto special = [](int id, const char* content) {
        return Json{{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
                    {"rstrip", false},  {"normalized", false}, {"special", true}};
    };
    Json config = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
        {"normalizer", nullptr},
        {"pre_tokenizer", nullptr},
        {"post_processor",
         {{"type", "TemplateProcessing"},
          {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
          {"pair",
           {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
            {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
            {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", "<unk>"},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", true},
          {"byte_fallback", true},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", mergeList}}},
    };
    if (style == SentencePieceStyle::NormalizerPrependReplace) {
        config["normalizer"] = {{"type", "Sequence"},
                                {"normalizers",
                                 {{{"type", "Prepend"}, {"prepend", "▁"}},
                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
    } else {
        config["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
    }
    return config;
}

Json harmonyTokenizerJson() {
    Json config = fixtureTokenizerJson("tiny-qwen3moe");
    Json added = Json::array();
    int id = 1000;
    for (const char* token : {"<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                              "<|return|>", "<|call|>"})
        added.push_back({{"id", id++},        {"content", token},  {"single_word", false}, {"lstrip", false},
                         {"rstrip", false},   {"normalized", false}, {"special", true}});
    config["added_tokens"] = added;
    return config;
}

text::Tokenizer tokenizerFrom(const Json& config) { return text::Tokenizer::fromJson(config.dump(), "test tokenizer.json"); }

int idOf(const text::Tokenizer& tokenizer, const std::string& token) {
    const auto id = tokenizer.tokenToId(token);
    if (!id) throw std::runtime_error("test tokenizer lacks the token " + token);
    return *id;
}

}  // namespace tandem::test
