#include "ui/widgets/reasoning_section.h"

#include <QToolButton>
#include <QVBoxLayout>

#include "ui/widgets/auto_height_text_view.h"

namespace tandem::ui {

ReasoningSection::ReasoningSection(QWidget* parent)
    : QWidget(parent), toggle_(new QToolButton(this)), body_(new AutoHeightTextView(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    toggle_->setObjectName(QStringLiteral("reasoningToggle"));
    toggle_->setCheckable(true);
    toggle_->setAutoRaise(true);
    toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    connect(toggle_, &QToolButton::toggled, this, [this](bool on) {
        body_->setVisible(on);
        updateToggle();
    });
    body_->setObjectName(QStringLiteral("reasoningText"));
    body_->setAccessibleName(tr("Reasoning"));
    body_->setVisible(false);
    layout->addWidget(toggle_, 0, Qt::AlignLeft);
    layout->addWidget(body_);
    updateToggle();
}

void ReasoningSection::setReasoning(const QString& text, bool thinking) {
    thinking_ = thinking;
    if (text != text_) {
        text_ = text;
        body_->showMarkdown(text);
    }
    updateToggle();
}

bool ReasoningSection::isExpanded() const { return toggle_->isChecked(); }
void ReasoningSection::setExpanded(bool expanded) { toggle_->setChecked(expanded); }

void ReasoningSection::updateToggle() {
    const int words = static_cast<int>(text_.split(QLatin1Char(' '), Qt::SkipEmptyParts).size());
    toggle_->setArrowType(toggle_->isChecked() ? Qt::DownArrow : Qt::RightArrow);
    const QString count = words == 1 ? tr("1 word") : tr("%1 words").arg(words);
    toggle_->setText(thinking_ ? tr("Reasoning… (%1 so far)").arg(count) : tr("Reasoning (%1)").arg(count));
    toggle_->setAccessibleName(toggle_->isChecked() ? tr("Hide the model's reasoning") : tr("Show the model's reasoning"));
}

}  // namespace tandem::ui
