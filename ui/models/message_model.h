#pragma once
// The messages of the open conversation. A streaming answer grows through appendText(); views listen
// to dataChanged like for any other change.
#include <QAbstractListModel>

#include "ui/store/chat_types.h"

namespace tandem::ui {

class MessageModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Roles {
        IdRole = Qt::UserRole + 1,
        RoleRole,  // "user" or "assistant"
        ContentRole,
        ReasoningRole,
        StateRole,  // MessageState as int
        GeneratedTokensRole,
        TokensPerSecondRole,
        TimeToFirstTokenRole,
        ModelRole,
        ErrorRole,
        VersionRole,   // which version of its place, from 1
        VersionsRole,  // how many versions its place has
        OmittedMessagesRole,
    };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    const ChatMessage& message(int row) const { return messages_[row]; }
    const QList<ChatMessage>& messages() const { return messages_; }
    int rowOfId(qint64 id) const;

    void setMessages(const QList<ChatMessage>& messages);
    // The same conversation shown another way (another version, a message deleted): the rows up to the
    // first that differs stay, changed in place where their data changed; the rest are replaced.
    void updateMessages(const QList<ChatMessage>& messages);
    void append(const ChatMessage& message);
    void appendText(qint64 id, const QString& answer, const QString& reasoning);
    // Replaces the message with the same id.
    void update(const ChatMessage& message);
    // Removes `row` and every later message.
    void truncate(int row);

private:
    QList<ChatMessage> messages_;
};

}  // namespace tandem::ui
