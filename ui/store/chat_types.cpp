#include "ui/store/chat_types.h"

#include <QJsonArray>

namespace tandem::ui {

QString toString(MessageState state) {
    switch (state) {
    case MessageState::Complete: return QStringLiteral("complete");
    case MessageState::Streaming: return QStringLiteral("streaming");
    case MessageState::Stopped: return QStringLiteral("stopped");
    case MessageState::Failed: return QStringLiteral("failed");
    case MessageState::Interrupted: return QStringLiteral("interrupted");
    }
    return QStringLiteral("complete");
}

MessageState messageStateFromString(const QString& text) {
    for (const auto s : {MessageState::Streaming, MessageState::Stopped, MessageState::Failed, MessageState::Interrupted})
        if (text == toString(s)) return s;
    return MessageState::Complete;
}

QJsonObject ConversationSettings::toJson() const {
    QJsonObject json{{"system_prompt", systemPrompt}, {"override_sampling", overrideSampling}, {"max_new_tokens", maxNewTokens}};
    if (overrideSampling) {
        json["sampling"] = QJsonObject{{"temperature", sampling.temperature},
                                       {"top_p", sampling.topP},
                                       {"top_k", sampling.topK},
                                       {"min_p", sampling.minP},
                                       {"repetition_penalty", sampling.repetitionPenalty}};
    }
    if (!stopStrings.isEmpty()) json["stop_strings"] = QJsonArray::fromStringList(stopStrings);
    return json;
}

ConversationSettings ConversationSettings::fromJson(const QJsonObject& json) {
    ConversationSettings s;
    s.systemPrompt = json.value("system_prompt").toString();
    s.overrideSampling = json.value("override_sampling").toBool();
    s.maxNewTokens = json.value("max_new_tokens").toInt();
    for (const auto& stop : json.value("stop_strings").toArray())
        if (!stop.toString().isEmpty()) s.stopStrings.append(stop.toString());
    const QJsonObject sampling = json.value("sampling").toObject();
    s.sampling.temperature = static_cast<float>(sampling.value("temperature").toDouble(s.sampling.temperature));
    s.sampling.topP = static_cast<float>(sampling.value("top_p").toDouble(s.sampling.topP));
    s.sampling.topK = sampling.value("top_k").toInt(s.sampling.topK);
    s.sampling.minP = static_cast<float>(sampling.value("min_p").toDouble(s.sampling.minP));
    s.sampling.repetitionPenalty = static_cast<float>(sampling.value("repetition_penalty").toDouble(s.sampling.repetitionPenalty));
    return s;
}

bool ConversationSettings::operator==(const ConversationSettings& other) const { return toJson() == other.toJson(); }

}  // namespace tandem::ui
