#pragma once
// The list of conversations with search, a new-chat button and the per-conversation actions (rename,
// export, delete). It only shows the ConversationListModel and reports what the user asked for.
#include <QWidget>

class QLineEdit;
class QListView;
class QPushButton;

namespace tandem::ui {

class ConversationListModel;

class ConversationSidebar : public QWidget {
    Q_OBJECT
public:
    enum class ExportFormat { Markdown, Json };

    explicit ConversationSidebar(ConversationListModel* model, QWidget* parent = nullptr);

    void setCurrentConversation(qint64 id);
    void focusSearch();
    QLineEdit* searchField() const { return search_; }
    QListView* listView() const { return list_; }
    // Starts renaming the conversation in place.
    void rename(qint64 id);

signals:
    void conversationActivated(qint64 id);
    void newChatRequested();
    void deleteRequested(qint64 id);
    void exportRequested(qint64 id, tandem::ui::ConversationSidebar::ExportFormat format);

private:
    void showContextMenu(const QPoint& pos);
    qint64 idAt(int row) const;

    ConversationListModel* model_;
    QLineEdit* search_;
    QPushButton* newChat_;
    QListView* list_;
    qint64 currentId_ = 0;
};

}  // namespace tandem::ui
