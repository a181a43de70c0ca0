#pragma once
// The sidebar's list: conversations newest first, or those matching a search with the matching text.
// Renaming through the model (EditRole) renames in the store.
#include <QAbstractListModel>

#include "ui/store/conversation_store.h"

namespace tandem::ui {

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Roles { IdRole = Qt::UserRole + 1, SnippetRole, UpdatedRole };

    explicit ConversationListModel(ConversationStore* store, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role) override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QHash<int, QByteArray> roleNames() const override;

    QString searchQuery() const { return query_; }
    void setSearchQuery(const QString& query);
    qint64 idAt(int row) const;
    int rowOf(qint64 id) const;  // -1 when not listed

public slots:
    void refresh();

private:
    ConversationStore* store_;
    QString query_;
    QList<ConversationSummary> rows_;
};

}  // namespace tandem::ui
