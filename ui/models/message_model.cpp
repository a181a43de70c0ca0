#include "ui/models/message_model.h"

#include <algorithm>

namespace tandem::ui {

int MessageModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(messages_.size()); }

QVariant MessageModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const ChatMessage& m = messages_[index.row()];
    switch (role) {
    case Qt::DisplayRole:
    case ContentRole: return m.content;
    case IdRole: return m.id;
    case RoleRole: return m.role;
    case ReasoningRole: return m.reasoning;
    case StateRole: return static_cast<int>(m.state);
    case GeneratedTokensRole: return m.metrics.generatedTokens;
    case TokensPerSecondRole: return m.metrics.tokensPerSecond;
    case TimeToFirstTokenRole: return m.metrics.timeToFirstTokenSeconds;
    case ModelRole: return m.model;
    case ErrorRole: return m.error;
    case VersionRole: return m.version;
    case VersionsRole: return m.versions;
    case OmittedMessagesRole: return m.omittedMessages;
    default: return {};
    }
}

QHash<int, QByteArray> MessageModel::roleNames() const {
    return {{IdRole, "messageId"},        {RoleRole, "role"},
            {ContentRole, "content"},     {ReasoningRole, "reasoning"},
            {StateRole, "state"},         {GeneratedTokensRole, "generatedTokens"},
            {TokensPerSecondRole, "tokensPerSecond"}, {TimeToFirstTokenRole, "timeToFirstToken"},
            {ModelRole, "model"},         {ErrorRole, "error"},
            {VersionRole, "version"},     {VersionsRole, "versions"},
            {OmittedMessagesRole, "omittedMessages"}};
}

int MessageModel::rowOfId(qint64 id) const {
    for (int i = 0; i < messages_.size(); ++i)
        if (messages_[i].id == id) return i;
    return -1;
}

void MessageModel::setMessages(const QList<ChatMessage>& messages) {
    beginResetModel();
    messages_ = messages;
    endResetModel();
}

namespace {

bool sameData(const ChatMessage& a, const ChatMessage& b) {
    return a.content == b.content && a.reasoning == b.reasoning && a.state == b.state && a.version == b.version &&
           a.versions == b.versions && a.parentId == b.parentId && a.omittedMessages == b.omittedMessages &&
           a.error == b.error && a.model == b.model && a.metrics.generatedTokens == b.metrics.generatedTokens &&
           a.metrics.tokensPerSecond == b.metrics.tokensPerSecond;
}

}  // namespace

void MessageModel::updateMessages(const QList<ChatMessage>& messages) {
    int same = 0;
    const int common = static_cast<int>(std::min(messages_.size(), messages.size()));
    while (same < common && messages_[same].id == messages[same].id) ++same;
    for (int row = 0; row < same; ++row) {
        if (sameData(messages_[row], messages[row])) continue;
        messages_[row] = messages[row];
        emit dataChanged(index(row), index(row));
    }
    if (same < messages_.size()) truncate(same);
    if (same < messages.size()) {
        beginInsertRows({}, same, static_cast<int>(messages.size()) - 1);
        messages_.append(messages.mid(same));
        endInsertRows();
    }
}

void MessageModel::append(const ChatMessage& message) {
    const int row = static_cast<int>(messages_.size());
    beginInsertRows({}, row, row);
    messages_.append(message);
    endInsertRows();
}

void MessageModel::appendText(qint64 id, const QString& answer, const QString& reasoning) {
    const int row = rowOfId(id);
    if (row < 0) return;
    messages_[row].content += answer;
    messages_[row].reasoning += reasoning;
    emit dataChanged(index(row), index(row), {ContentRole, ReasoningRole});
}

void MessageModel::update(const ChatMessage& message) {
    const int row = rowOfId(message.id);
    if (row < 0) return;
    messages_[row] = message;
    emit dataChanged(index(row), index(row));
}

void MessageModel::truncate(int row) {
    if (row < 0 || row >= messages_.size()) return;
    beginRemoveRows({}, row, static_cast<int>(messages_.size()) - 1);
    messages_.erase(messages_.begin() + row, messages_.end());
    endRemoveRows();
}

}  // namespace tandem::ui
