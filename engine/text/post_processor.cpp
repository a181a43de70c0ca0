#include "text/post_processor.h"

#include <nlohmann/json.hpp>

namespace tandem::text {
namespace {

// The "single" template: a list of special-token id runs and one place ("$A") for the text's ids.
class TemplateProcessing final : public PostProcessor {
public:
    struct Item {
        std::vector<int> specialIds;  // empty for the sequence itself
        bool isSequence = false;
    };

    explicit TemplateProcessing(std::vector<Item> items) : items_(std::move(items)) {}

    void process(std::vector<int>& ids) const override {
        std::vector<int> out;
        for (const Item& item : items_) {
            if (item.isSequence)
                out.insert(out.end(), ids.begin(), ids.end());
            else
                out.insert(out.end(), item.specialIds.begin(), item.specialIds.end());
        }
        ids = std::move(out);
    }

private:
    std::vector<Item> items_;
};

class NoIdChanges final : public PostProcessor {
public:
    void process(std::vector<int>&) const override {}
};

class SequenceProcessor final : public PostProcessor {
public:
    explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
    void process(std::vector<int>& ids) const override {
        for (const auto& step : steps_) step->process(ids);
    }

private:
    std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> makeTemplateProcessing(const Json& config, const std::string& where) {
    const Json& single = requiredField(config, "single", where);
    if (!single.is_array()) throwMalformed(where + ".single", "expected a list");
    const Json& specials = requiredField(config, "special_tokens", where);
    std::vector<TemplateProcessing::Item> items;
    bool sawSequence = false;
    for (std::size_t i = 0; i < single.size(); ++i) {
        const std::string at = where + ".single[" + std::to_string(i) + "]";
        const Json& piece = single[i];
        if (piece.is_object() && piece.contains("Sequence")) {
            if (sawSequence) throwMalformed(at, "a single-text template can hold the sequence only once");
            sawSequence = true;
            items.push_back({{}, true});
        } else if (piece.is_object() && piece.contains("SpecialToken")) {
            const std::string name = stringField(piece["SpecialToken"], "id", at + ".SpecialToken");
            if (!specials.is_object() || !specials.contains(name))
                throwMalformed(at, "the special token '" + name + "' is not listed in special_tokens");
            const Json& ids = requiredField(specials[name], "ids", where + ".special_tokens." + name);
            if (!ids.is_array()) throwMalformed(where + ".special_tokens." + name + ".ids", "expected a list of ids");
            TemplateProcessing::Item item;
            for (const Json& id : ids) {
                if (!id.is_number_integer()) throwMalformed(where + ".special_tokens." + name + ".ids", "expected ids");
                item.specialIds.push_back(id.get<int>());
            }
            items.push_back(std::move(item));
        } else {
            throwMalformed(at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
        }
    }
    if (!sawSequence) throwMalformed(where + ".single", "the template has no place for the text ($A)");
    return std::make_unique<TemplateProcessing>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> makePostProcessor(const Json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = componentType(config, where);
    if (type == "TemplateProcessing") return makeTemplateProcessing(config, where);
    // ByteLevel only trims the offsets of tokens; ids are unchanged.
    if (type == "ByteLevel") return std::make_unique<NoIdChanges>();
    if (type == "Sequence") {
        const Json& list = requiredField(config, "processors", where);
        if (!list.is_array()) throwMalformed(where + ".processors", "expected a list");
        std::vector<std::unique_ptr<PostProcessor>> steps;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto step = makePostProcessor(list[i], where + ".processors[" + std::to_string(i) + "]");
            if (step) steps.push_back(std::move(step));
        }
        return std::make_unique<SequenceProcessor>(std::move(steps));
    }
    throwMalformed(where, "post-processor type '" + type +
                              "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
}

}  // namespace tandem::text
