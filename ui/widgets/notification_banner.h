#pragma once
// A message across the top of the chat that stays until dismissed, with an optional action: used for
// what the user must know but that should not block them (a model that failed to load, a database
// that cannot be used). Unlike a modal dialog it never stops the rest of the window.
#include <QFrame>

class QLabel;
class QPushButton;
class QToolButton;

namespace tandem::ui {

class NotificationBanner : public QFrame {
    Q_OBJECT
public:
    enum class Kind { Error, Warning, Information };

    explicit NotificationBanner(QWidget* parent = nullptr);

    // An empty `actionText` hides the action button. `topic` lets the window take the message down
    // when what it is about is resolved (e.g. "model" once a model loads).
    void showMessage(Kind kind, const QString& text, const QString& actionText = {}, const QString& topic = {});
    QString text() const;
    Kind kind() const { return kind_; }
    QString topic() const { return topic_; }

signals:
    void actionTriggered();

private:
    QLabel* label_;
    QPushButton* action_;
    QToolButton* close_;
    Kind kind_ = Kind::Information;
    QString topic_;
};

}  // namespace tandem::ui
