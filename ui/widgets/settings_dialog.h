#pragma once
// The app's settings. It edits a copy; the main window saves the result and, when an engine setting
// changed, offers to reload the model.
#include <QDialog>

#include "ui/settings/app_settings.h"

class QCheckBox;
class QComboBox;
class QLineEdit;
class QSpinBox;

namespace tandem::ui {

class SamplingEditor;

struct SettingsValues {
    EngineSettings engine;
    SamplingDefaults sampling;
    Appearance appearance;
    int defaultDeferral = 0;
    QString hubEndpoint;

    static SettingsValues read(const AppSettings& settings);
    void write(AppSettings& settings) const;
    // Engine settings only take effect when the model is loaded again.
    bool needsReloadComparedTo(const SettingsValues& before) const { return !(engine == before.engine); }
};

class SettingsDialog : public QDialog {
    Q_OBJECT
public:
    SettingsDialog(const SettingsValues& values, const QStringList& gpuNames, QWidget* parent = nullptr);

    SettingsValues values() const;
    void setValues(const SettingsValues& values);

private:
    QWidget* engineTab(const QStringList& gpuNames);
    QWidget* generationTab();
    QWidget* appearanceTab();
    QWidget* downloadsTab();

    QLineEdit* modelDir_;
    QSpinBox* threads_;
    QComboBox* numa_;
    QComboBox* kernel_;
    QComboBox* device_;
    QSpinBox* contextLength_;
    QSpinBox* defaultDeferral_;
    QCheckBox* useModelSampling_;
    SamplingEditor* sampling_;
    QSpinBox* maxNewTokens_;
    QComboBox* theme_;
    QSpinBox* fontSize_;
    QLineEdit* hubEndpoint_;
};

}  // namespace tandem::ui
