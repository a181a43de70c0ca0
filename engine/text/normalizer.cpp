#include "text/normalizer.h"

#include <nlohmann/json.hpp>

#include <vector>

#include "text/pattern.h"
#include "text/unicode.h"

namespace tandem::text {
namespace {

class UnicodeNormalizer final : public Normalizer {
public:
    explicit UnicodeNormalizer(unicode::NormalForm form) : form_(form) {}
    void normalize(std::string& text) const override { text = unicode::normalize(text, form_); }

private:
    unicode::NormalForm form_;
};

class SequenceNormalizer final : public Normalizer {
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
    void normalize(std::string& text) const override {
        for (const auto& step : steps_) step->normalize(text);
    }

private:
    std::vector<std::unique_ptr<Normalizer>> steps_;
};

// SentencePiece-style tokenizers (Llama 2, Mistral) prepend "▁" so the first word looks like every
// other word; an empty stretch stays empty.
class PrependNormalizer final : public Normalizer {
public:
    explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
    void normalize(std::string& text) const override {
        if (!text.empty()) text.insert(0, prefix_);
    }

private:
    std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void normalize(std::string& text) const override { text = pattern_.replaceAll(text, content_); }

private:
    Pattern pattern_;
    std::string content_;
};

}  // namespace

std::unique_ptr<Normalizer> makeNormalizer(const Json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = componentType(config, where);
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFD);
    if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKC);
    if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKD);
    if (type == "Prepend") return std::make_unique<PrependNormalizer>(stringField(config, "prepend", where));
    if (type == "Replace")
        return std::make_unique<ReplaceNormalizer>(Pattern::fromJson(requiredField(config, "pattern", where), where + ".pattern"),
                                                   stringField(config, "content", where));
    if (type == "Sequence") {
        const Json& list = requiredField(config, "normalizers", where);
        if (!list.is_array()) throwMalformed(where + ".normalizers", "expected a list");
        std::vector<std::unique_ptr<Normalizer>> steps;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto step = makeNormalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]");
            if (step) steps.push_back(std::move(step));
        }
        return std::make_unique<SequenceNormalizer>(std::move(steps));
    }
    throwMalformed(where, "normalizer type '" + type +
                              "' is not supported (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)");
}

}  // namespace tandem::text
