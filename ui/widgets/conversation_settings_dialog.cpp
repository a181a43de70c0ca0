#include "ui/widgets/conversation_settings_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QVBoxLayout>

#include "ui/widgets/sampling_editor.h"

namespace tandem::ui {

ConversationSettingsDialog::ConversationSettingsDialog(const ConversationSettings& settings,
                                                       const tandem::SamplingOptions& defaults, QWidget* parent)
    : QDialog(parent), systemPrompt_(new QPlainTextEdit(this)),
      override_(new QCheckBox(tr("Use its own sampling instead of the default"), this)),
      sampling_(new SamplingEditor(this)), maxNewTokens_(new QSpinBox(this)),
      stopStrings_(new QPlainTextEdit(this)) {
    setWindowTitle(tr("Conversation Settings"));
    auto* layout = new QVBoxLayout(this);
    auto* label = new QLabel(tr("&System prompt: instructions the model sees before the conversation"), this);
    label->setBuddy(systemPrompt_);
    label->setWordWrap(true);
    layout->addWidget(label);
    systemPrompt_->setAccessibleName(tr("System prompt"));
    systemPrompt_->setPlaceholderText(tr("For example: You are a concise assistant. Answer in English."));
    systemPrompt_->setPlainText(settings.systemPrompt);
    systemPrompt_->setTabChangesFocus(true);
    layout->addWidget(systemPrompt_);
    layout->addWidget(override_);
    sampling_->setSampling(settings.overrideSampling ? settings.sampling : defaults);
    sampling_->setEnabled(settings.overrideSampling);
    override_->setChecked(settings.overrideSampling);
    connect(override_, &QCheckBox::toggled, sampling_, &QWidget::setEnabled);
    layout->addWidget(sampling_);
    auto* form = new QFormLayout;
    maxNewTokens_->setRange(0, 1 << 17);
    maxNewTokens_->setSpecialValueText(tr("Default"));
    maxNewTokens_->setValue(settings.maxNewTokens);
    maxNewTokens_->setAccessibleName(tr("Longest answer in tokens"));
    form->addRow(tr("&Longest answer:"), maxNewTokens_);
    layout->addLayout(form);
    auto* stopLabel = new QLabel(tr("Stop stri&ngs: an answer ends before the first of these, one per line"), this);
    stopLabel->setBuddy(stopStrings_);
    stopLabel->setWordWrap(true);
    layout->addWidget(stopLabel);
    stopStrings_->setAccessibleName(tr("Stop strings"));
    stopStrings_->setPlaceholderText(tr("For example: User:"));
    stopStrings_->setPlainText(settings.stopStrings.join(QLatin1Char('\n')));
    stopStrings_->setTabChangesFocus(true);
    stopStrings_->setMaximumHeight(stopStrings_->fontMetrics().lineSpacing() * 5);
    layout->addWidget(stopStrings_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    resize(520, 600);
}

ConversationSettings ConversationSettingsDialog::settings() const {
    ConversationSettings s;
    s.systemPrompt = systemPrompt_->toPlainText().trimmed();
    s.overrideSampling = override_->isChecked();
    s.sampling = sampling_->sampling();
    s.maxNewTokens = maxNewTokens_->value();
    // Each line as typed, spaces included (" User:" is not "User:"); an empty line is no stop string.
    for (const QString& line : stopStrings_->toPlainText().split(QLatin1Char('\n')))
        if (!line.isEmpty()) s.stopStrings.append(line);
    return s;
}

}  // namespace tandem::ui
