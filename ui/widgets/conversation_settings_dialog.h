#pragma once
// One conversation's own system prompt, sampling and stop strings.
#include <QDialog>

#include "ui/store/chat_types.h"

class QCheckBox;
class QPlainTextEdit;
class QSpinBox;

namespace tandem::ui {

class SamplingEditor;

class ConversationSettingsDialog : public QDialog {
    Q_OBJECT
public:
    // `defaults`: what the conversation uses when it does not override sampling, to start editing from.
    ConversationSettingsDialog(const ConversationSettings& settings, const tandem::SamplingOptions& defaults,
                               QWidget* parent = nullptr);

    ConversationSettings settings() const;

private:
    QPlainTextEdit* systemPrompt_;
    QCheckBox* override_;
    SamplingEditor* sampling_;
    QSpinBox* maxNewTokens_;
    QPlainTextEdit* stopStrings_;
};

}  // namespace tandem::ui
