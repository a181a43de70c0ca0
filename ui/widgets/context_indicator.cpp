#include "ui/widgets/context_indicator.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>

namespace tandem::ui {

ContextIndicator::ContextIndicator(QWidget* parent) : QWidget(parent), bar_(new QProgressBar(this)), label_(new QLabel(this)) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    bar_->setTextVisible(false);
    bar_->setFixedWidth(110);
    bar_->setFixedHeight(8);
    bar_->setAccessibleName(tr("Context used"));
    bar_->setObjectName(QStringLiteral("contextBar"));
    label_->setObjectName(QStringLiteral("contextLabel"));
    layout->addWidget(bar_);
    layout->addWidget(label_);
    setUsage(0, 0);
}

void ContextIndicator::setUsage(int used, int capacity) {
    const QLocale locale;
    if (capacity <= 0) {
        bar_->setRange(0, 1);
        bar_->setValue(0);
        label_->setText(tr("Context: no model"));
        setToolTip(tr("How much of the model's context this conversation fills, once a model is loaded."));
        return;
    }
    bar_->setRange(0, capacity);
    bar_->setValue(std::min(used, capacity));
    const int percent = static_cast<int>(100.0 * used / capacity + 0.5);
    label_->setText(tr("%1 / %2 tokens").arg(locale.toString(used), locale.toString(capacity)));
    bar_->setAccessibleDescription(tr("%1 percent of the context used").arg(percent));
    setToolTip(percent >= 90 ? tr("The context is almost full (%1%). Start a new chat, or raise the context length in "
                                  "Settings and reload the model.").arg(percent)
                             : tr("This conversation fills %1% of the model's context.").arg(percent));
}

QString ContextIndicator::text() const { return label_->text(); }

}  // namespace tandem::ui
