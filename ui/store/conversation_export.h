#pragma once
// A conversation as a Markdown document for people and as JSON for programs.
#include <QByteArray>
#include <QList>
#include <QString>

#include "ui/store/chat_types.h"

namespace tandem::ui {

QString conversationToMarkdown(const Conversation& conversation, const QList<ChatMessage>& messages);
QByteArray conversationToJson(const Conversation& conversation, const QList<ChatMessage>& messages);

// Writes atomically (a crash leaves the old file or the new one, never half of it). Returns an error
// message for the user, or an empty string.
QString writeExportFile(const QString& path, const QByteArray& bytes);

}  // namespace tandem::ui
