// tandem::ModelChatTemplate (tandem/chat_template.h): text::ChatTemplate behind the public header.
#include "tandem/chat_template.h"

#include "text/chat_template.h"

namespace tandem {

ModelChatTemplate ModelChatTemplate::load(const std::filesystem::path& modelDir, std::string_view modelTypeForFallback) {
    ModelChatTemplate t;
    t.impl_ = std::make_shared<const text::ChatTemplate>(text::ChatTemplate::load(modelDir, modelTypeForFallback));
    return t;
}

std::string ModelChatTemplate::render(const nlohmann::ordered_json& messages, bool addGenerationPrompt,
                                      const nlohmann::ordered_json& variables) const {
    return impl_->render(messages, addGenerationPrompt, variables);
}

std::optional<std::string> ModelChatTemplate::specialToken(const std::string& name) const { return impl_->specialToken(name); }

const std::string& ModelChatTemplate::warning() const { return impl_->warning(); }

}  // namespace tandem
