#include "ui/widgets/notification_banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QStyle>
#include <QToolButton>

namespace tandem::ui {

NotificationBanner::NotificationBanner(QWidget* parent)
    : QFrame(parent), label_(new QLabel(this)), action_(new QPushButton(this)), close_(new QToolButton(this)) {
    setObjectName(QStringLiteral("banner"));
    setAccessibleName(tr("Notification"));
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(12, 8, 8, 8);
    label_->setWordWrap(true);
    label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    layout->addWidget(label_, 1);
    layout->addWidget(action_);
    close_->setText(QStringLiteral("✕"));
    close_->setAutoRaise(true);
    close_->setAccessibleName(tr("Dismiss notification"));
    close_->setToolTip(tr("Dismiss"));
    layout->addWidget(close_, 0, Qt::AlignTop);
    connect(close_, &QToolButton::clicked, this, &QWidget::hide);
    connect(action_, &QPushButton::clicked, this, &NotificationBanner::actionTriggered);
    hide();
}

void NotificationBanner::showMessage(Kind kind, const QString& text, const QString& actionText, const QString& topic) {
    kind_ = kind;
    topic_ = topic;
    static const char* const kinds[] = {"error", "warning", "information"};
    setProperty("kind", QString::fromLatin1(kinds[static_cast<int>(kind)]));
    style()->unpolish(this);
    style()->polish(this);
    label_->setText(text);
    setAccessibleDescription(text);
    action_->setText(actionText);
    action_->setAccessibleName(actionText);
    action_->setVisible(!actionText.isEmpty());
    show();
}

QString NotificationBanner::text() const { return label_->text(); }

}  // namespace tandem::ui
