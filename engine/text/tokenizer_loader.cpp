// Reading a tokenizer.json into the parts of Tokenizer::Impl (a tiktoken.model: tiktoken_loader.cpp).
#include <nlohmann/json.hpp>


#include "io/text_file.h"
#include "tandem/error.h"
#include "text/tiktoken_loader.h"
#include "text/tokenizer_impl.h"

namespace tandem::text {
namespace {

std::unique_ptr<BpeModel> makeModel(const Json& config, const std::string& where) {
    // Older files leave out the model type; a BPE model is recognized by its merges.
    const std::string type = config.is_object() && !config.contains("type") && config.contains("merges")
                                 ? "BPE"
                                 : componentType(config, where);
    if (type != "BPE")
        throwMalformed(where, "model type '" + type +
                                  "' is not supported; Tandem reads BPE tokenizers (the kind Qwen, DeepSeek, Kimi, "
                                  "Llama and Mistral models ship)");
    return std::make_unique<BpeModel>(config, where);
}

std::vector<AddedToken> readAddedTokens(const Json& list, const std::string& where) {
    std::vector<AddedToken> tokens;
    if (list.is_null()) return tokens;
    if (!list.is_array()) throwMalformed(where, "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        AddedToken token;
        const long long id = integerField(list[i], "id", at);
        if (id < 0 || id > kMaxTokenId)
            throwMalformed(at + ".id", "must be a token id from 0 to " + std::to_string(kMaxTokenId));
        token.id = static_cast<int>(id);
        token.content = stringField(list[i], "content", at);
        token.special = boolField(list[i], "special", at, false);
        token.singleWord = boolField(list[i], "single_word", at, false);
        token.lstrip = boolField(list[i], "lstrip", at, false);
        token.rstrip = boolField(list[i], "rstrip", at, false);
        token.normalized = boolField(list[i], "normalized", at, !token.special);
        tokens.push_back(std::move(token));
    }
    return tokens;
}

const Json& optionalComponent(const Json& config, const char* name) {
    static const Json null;
    const auto it = config.find(name);
    return it == config.end() ? null : *it;
}

}  // namespace

std::shared_ptr<const Tokenizer::Impl> buildTokenizer(const Json& config, const std::string& source) {
    if (!config.is_object()) throwMalformed(source, "expected a JSON object at the top level");
    const auto where = [&](const char* part) { return source + ": " + part; };
    auto impl = std::make_shared<Tokenizer::Impl>();
    impl->source = source;
    impl->model = makeModel(requiredField(config, "model", source), where("model"));
    impl->normalizer = makeNormalizer(optionalComponent(config, "normalizer"), where("normalizer"));
    impl->preTokenizer = makePreTokenizer(optionalComponent(config, "pre_tokenizer"), where("pre_tokenizer"));
    impl->postProcessor = makePostProcessor(optionalComponent(config, "post_processor"), where("post_processor"));
    impl->decoder = makeDecoder(optionalComponent(config, "decoder"), where("decoder"));
    auto added = readAddedTokens(optionalComponent(config, "added_tokens"), where("added_tokens"));
    impl->vocabSize = impl->model->size();
    for (const AddedToken& token : added) impl->vocabSize = std::max(impl->vocabSize, token.id + 1);
    impl->addedTokens = std::make_unique<AddedVocabulary>(std::move(added), impl->normalizer.get());
    return impl;
}

Tokenizer Tokenizer::fromJson(std::string_view json, const std::string& sourceName) {
    Json config;
    try {
        config = io::parseJson<Json>(json, sourceName);
    } catch (const Json::exception& e) {
        throw Error(sourceName + " is not valid JSON (" + e.what() +
                    "); the download may be incomplete: fetch the model's tokenizer.json again");
    }
    try {
        return Tokenizer(buildTokenizer(config, sourceName));
    } catch (const Json::exception& e) {
        throw Error(sourceName + " is malformed (" + e.what() + "); fetch the model's tokenizer.json again");
    }
}

Tokenizer Tokenizer::load(const std::filesystem::path& modelDirOrTokenizerFile) {
    std::error_code ec;
    std::filesystem::path file = modelDirOrTokenizerFile;
    const bool folder = std::filesystem::is_directory(modelDirOrTokenizerFile, ec);
    if (folder) {
        // tokenizer.json when the folder has one; otherwise a tiktoken vocabulary (Kimi-K2's release).
        file = modelDirOrTokenizerFile / "tokenizer.json";
        const auto tiktoken = modelDirOrTokenizerFile / "tiktoken.model";
        if (!std::filesystem::exists(file, ec) && std::filesystem::exists(tiktoken, ec)) file = tiktoken;
    }
    if (file.filename() == "tiktoken.model") return Tokenizer(loadTiktokenTokenizer(file.parent_path()));
    std::string text;
    try {
        text = io::readRegularFile(file);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + (folder ? "; the model folder needs the tokenizer from the model's download: "
                                                      "tokenizer.json, or tiktoken.model with tokenizer_config.json "
                                                      "(Kimi-K2), and has neither"
                                                    : "; the model folder needs the tokenizer.json from the model's download"));
    }
    return fromJson(text, file.string());
}

}  // namespace tandem::text
