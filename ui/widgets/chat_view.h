#pragma once
// The open conversation: one MessageView per row of the MessageModel, in a scroll area that follows a
// streaming answer while the reader is at the bottom. Changes are gathered and drawn at most every
// kRenderIntervalMs, so re-laying out Markdown never keeps up with the token rate instead of the user.
#include <QScrollArea>
#include <QSet>
#include <QTimer>

class QVBoxLayout;

namespace tandem::ui {

class MessageModel;
class MessageView;

class ChatView : public QScrollArea {
    Q_OBJECT
public:
    static constexpr int kRenderIntervalMs = 50;

    explicit ChatView(MessageModel* model, QWidget* parent = nullptr);

    void setBusy(bool busy);
    int messageCount() const { return static_cast<int>(views_.size()); }
    MessageView* messageView(int row) const { return views_.value(row); }
    // Draws pending changes now (the render timer does it otherwise).
    void renderPending();

signals:
    void copyRequested(qint64 messageId);
    void editSubmitted(qint64 messageId, const QString& text);
    void regenerateRequested();
    void versionRequested(qint64 messageId, int version);
    void deleteRequested(qint64 messageId);

private:
    void rebuild();
    void onRowsInserted(int first, int last);
    void onRowsRemoved(int first, int last);
    void markDirty(int row);
    void refreshRow(int row);
    MessageView* createView();
    // After another version of a message is shown, that place stays in view (not the bottom).
    void keepPlaceInView();

    MessageModel* model_;
    QWidget* content_;
    QVBoxLayout* layout_;
    QList<MessageView*> views_;
    QSet<int> dirty_;
    QTimer renderTimer_;
    bool busy_ = false;
    bool followBottom_ = true;
    int keepRow_ = -1;  // the row whose version was flipped, until the model has the new version
};

}  // namespace tandem::ui
