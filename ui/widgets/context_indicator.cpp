#include "ui/widgets/context_indicator.h"

#include <QAction>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMenu>
#include <QProgressBar>
#include <QSignalBlocker>
#include <QToolButton>

namespace tandem::ui {

ContextIndicator::ContextIndicator(QWidget* parent)
    : QWidget(parent), bar_(new QProgressBar(this)), label_(new QLabel(this)), menuButton_(new QToolButton(this)),
      fitAction_(new QAction(tr("Leave Out Earlier Messages When the Conversation Is Too Long"), this)) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    bar_->setTextVisible(false);
    // Shorter in a narrow window (down to 24 pixels), never longer than 110.
    bar_->setMinimumWidth(24);
    bar_->setMaximumWidth(110);
    bar_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    bar_->setFixedHeight(8);
    bar_->setAccessibleName(tr("Context used"));
    bar_->setObjectName(QStringLiteral("contextBar"));
    label_->setObjectName(QStringLiteral("contextLabel"));
    fitAction_->setCheckable(true);
    fitAction_->setChecked(true);
    fitAction_->setToolTip(tr("Send the system prompt and the latest messages when the whole conversation does not "
                              "fit the model's context; off, such a conversation is not sent at all"));
    connect(fitAction_, &QAction::toggled, this, &ContextIndicator::fitToContextToggled);
    auto* menu = new QMenu(this);
    menu->setToolTipsVisible(true);
    menu->addAction(fitAction_);
    menuButton_->setMenu(menu);
    menuButton_->setPopupMode(QToolButton::InstantPopup);
    menuButton_->setAutoRaise(true);
    menuButton_->setText(QStringLiteral("▾"));
    menuButton_->setAccessibleName(tr("Context policy"));
    menuButton_->setToolTip(tr("What is sent when the conversation is longer than the model's context"));
    layout->addWidget(bar_);
    layout->addWidget(label_);
    layout->addWidget(menuButton_);
    setUsage(0, 0);
}

void ContextIndicator::setFitToContext(bool fit) {
    const QSignalBlocker block(fitAction_);
    fitAction_->setChecked(fit);
}

void ContextIndicator::setUsage(int used, int capacity, int omitted) {
    const QLocale locale;
    if (used < 0) {
        bar_->setRange(0, 1);
        bar_->setValue(0);
        label_->setText(capacity > 0 ? tr("Context: %1 tokens, counted by the server").arg(locale.toString(capacity))
                                     : tr("Context: counted by the server"));
        setToolTip(tr("The model runs on a server, whose tokenizer counts the conversation; after an answer the "
                      "count it reports shows here. The whole conversation is sent."));
        return;
    }
    if (capacity <= 0 && used > 0) {  // a server that does not say how long its context is
        bar_->setRange(0, 1);
        bar_->setValue(0);
        label_->setText(tr("%1 tokens").arg(locale.toString(used)));
        setToolTip(tr("What the conversation took at the last answer, as the server counted it; the server does not "
                      "say how long its context is."));
        return;
    }
    if (capacity <= 0) {
        bar_->setValue(0);
        label_->setText(tr("Context: no model"));
        setToolTip(tr("How much of the model's context this conversation fills, once a model is loaded."));
        return;
    }
    bar_->setRange(0, capacity);
    bar_->setValue(std::min(used, capacity));
    const int percent = static_cast<int>(100.0 * used / capacity + 0.5);
    QString text = tr("%1 / %2 tokens").arg(locale.toString(used), locale.toString(capacity));
    if (omitted > 0) text += tr(" · %1 left out").arg(locale.toString(omitted));
    label_->setText(text);
    bar_->setAccessibleDescription(tr("%1 percent of the context used").arg(percent));
    if (used > capacity)
        setToolTip(tr("The conversation's last message alone is longer than the context (%1 tokens): it cannot be "
                      "answered. Delete or shorten it, or raise the context length in Settings and reload the model.")
                       .arg(locale.toString(capacity)));
    else if (omitted > 0)
        setToolTip(tr("The conversation is longer than the model's context: %1 earlier messages are left out of what "
                      "is sent, after the system prompt. The count is what is sent.")
                       .arg(omitted));
    else if (percent >= 90)
        setToolTip(tr("The context is almost full (%1%). Start a new chat, or raise the context length in Settings "
                      "and reload the model.")
                       .arg(percent));
    else
        setToolTip(tr("This conversation fills %1% of the model's context.").arg(percent));
}

QString ContextIndicator::text() const { return label_->text(); }

}  // namespace tandem::ui
