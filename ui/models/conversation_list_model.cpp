#include "ui/models/conversation_list_model.h"

#include <algorithm>

namespace tandem::ui {

ConversationListModel::ConversationListModel(ConversationStore* store, QObject* parent)
    : QAbstractListModel(parent), store_(store) {
    connect(store_, &ConversationStore::conversationsChanged, this, &ConversationListModel::refresh);
    refresh();
}

int ConversationListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const ConversationSummary& c = rows_[index.row()];
    switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole: return c.title;
    case Qt::ToolTipRole: return c.snippet.isEmpty() ? c.title : c.snippet;
    case Qt::AccessibleTextRole: return c.title;
    case IdRole: return c.id;
    case SnippetRole: return c.snippet;
    case UpdatedRole: return c.updatedAt;
    default: return {};
    }
}

bool ConversationListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::EditRole || !checkIndex(index, CheckIndexOption::IndexIsValid)) return false;
    const QString title = value.toString().simplified();
    if (title.isEmpty()) return false;
    // The store's change notification refreshes the list.
    return store_->renameConversation(rows_[index.row()].id, title);
}

Qt::ItemFlags ConversationListModel::flags(const QModelIndex& index) const {
    return QAbstractListModel::flags(index) | (index.isValid() ? Qt::ItemIsEditable : Qt::NoItemFlags);
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
    auto names = QAbstractListModel::roleNames();
    names.insert(IdRole, "conversationId");
    names.insert(SnippetRole, "snippet");
    names.insert(UpdatedRole, "updated");
    return names;
}

void ConversationListModel::setSearchQuery(const QString& query) {
    if (query == query_) return;
    query_ = query;
    refresh();
}

qint64 ConversationListModel::idAt(int row) const { return row >= 0 && row < rows_.size() ? rows_[row].id : 0; }

int ConversationListModel::rowOf(qint64 id) const {
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].id == id) return i;
    return -1;
}

void ConversationListModel::refresh() {
    QList<ConversationSummary> fresh = query_.trimmed().isEmpty() ? store_->conversations() : store_->search(query_);
    // Same conversations in the same order (a rename, a message that did not reorder the list): update in
    // place, so selection and an open rename editor survive.
    const bool sameRows = fresh.size() == rows_.size() &&
                          std::equal(fresh.cbegin(), fresh.cend(), rows_.cbegin(),
                                     [](const ConversationSummary& a, const ConversationSummary& b) { return a.id == b.id; });
    if (sameRows) {
        rows_ = std::move(fresh);
        if (!rows_.isEmpty()) emit dataChanged(index(0), index(static_cast<int>(rows_.size()) - 1));
        return;
    }
    beginResetModel();
    rows_ = std::move(fresh);
    endResetModel();
}

}  // namespace tandem::ui
