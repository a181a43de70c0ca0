#include "ui/store/conversation_export.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QStringList>

namespace tandem::ui {
namespace {

QString roleHeading(const ChatMessage& m) {
    if (m.role == QLatin1String("user")) return QStringLiteral("You");
    return m.model.isEmpty() ? QStringLiteral("Assistant") : QStringLiteral("Assistant (%1)").arg(m.model);
}

// Quotes every line, so the reasoning reads as one aside. Its "# ..." lines are escaped: a heading
// inside a quote would otherwise end up in the document's outline.
QString blockquote(const QString& text) {
    QStringList lines = text.split(QLatin1Char('\n'));
    for (QString& line : lines) {
        if (line.startsWith(QLatin1Char('#'))) line.prepend(QLatin1Char('\\'));
        line = line.isEmpty() ? QStringLiteral(">") : QStringLiteral("> ") + line;
    }
    return lines.join(QLatin1Char('\n'));
}

// A message that opens a code fence and never closes it (a stopped answer) would swallow the rest of
// the document; close it.
QString closeOpenFence(const QString& text) {
    int fences = 0;
    for (const QString& line : text.split(QLatin1Char('\n')))
        if (line.trimmed().startsWith(QLatin1String("```"))) ++fences;
    return fences % 2 ? text + QStringLiteral("\n```") : text;
}

QString isoTime(const QDateTime& t) { return t.toUTC().toString(Qt::ISODate); }

}  // namespace

QString conversationToMarkdown(const Conversation& conversation, const QList<ChatMessage>& messages) {
    QString md = QStringLiteral("# %1\n\n").arg(conversation.title);
    md += QStringLiteral("*Exported from Tandem · started %1*\n\n").arg(conversation.createdAt.toString(Qt::ISODate));
    if (!conversation.settings.systemPrompt.isEmpty())
        md += QStringLiteral("**System prompt**\n\n%1\n\n").arg(blockquote(conversation.settings.systemPrompt));
    for (const ChatMessage& m : messages) {
        md += QStringLiteral("## %1\n\n").arg(roleHeading(m));
        if (!m.reasoning.isEmpty()) md += QStringLiteral("> **Reasoning**\n>\n%1\n\n").arg(blockquote(closeOpenFence(m.reasoning)));
        md += closeOpenFence(m.content) + QStringLiteral("\n\n");
        if (m.role == QLatin1String("assistant") && m.metrics.generatedTokens > 0)
            md += QStringLiteral("*%1 tokens · %2 tokens/s*\n\n").arg(m.metrics.generatedTokens).arg(m.metrics.tokensPerSecond, 0, 'f', 1);
        if (m.omittedMessages > 0)
            md += QStringLiteral("*%1 earlier messages were left out of this answer's prompt to fit the context.*\n\n")
                      .arg(m.omittedMessages);
    }
    return md;
}

QByteArray conversationToJson(const Conversation& conversation, const QList<ChatMessage>& messages) {
    QJsonArray list;
    for (const ChatMessage& m : messages) {
        QJsonObject o{{"role", m.role}, {"content", m.content}, {"created_at", isoTime(m.createdAt)}, {"state", toString(m.state)}};
        if (!m.reasoning.isEmpty()) o["reasoning"] = m.reasoning;
        if (m.role == QLatin1String("assistant")) {
            o["model"] = m.model;
            o["stats"] = QJsonObject{{"prompt_tokens", m.metrics.promptTokens},
                                     {"generated_tokens", m.metrics.generatedTokens},
                                     {"tokens_per_second", m.metrics.tokensPerSecond},
                                     {"time_to_first_token_seconds", m.metrics.timeToFirstTokenSeconds}};
            if (m.omittedMessages > 0) o["omitted_messages"] = m.omittedMessages;
        }
        if (m.versions > 1) {
            o["version"] = m.version;
            o["versions"] = m.versions;
        }
        if (!m.error.isEmpty()) o["error"] = m.error;
        list.append(o);
    }
    const QJsonObject root{{"format", "tandem-conversation"},
                           {"version", 1},
                           {"title", conversation.title},
                           {"created_at", isoTime(conversation.createdAt)},
                           {"settings", conversation.settings.toJson()},
                           {"messages", list}};
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

QString writeExportFile(const QString& path, const QByteArray& bytes) {
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit())
        return QStringLiteral("Could not write %1: %2").arg(QDir::toNativeSeparators(path), file.errorString());
    return {};
}

}  // namespace tandem::ui
