#pragma once
// Typed access to the app's QSettings, with the defaults that work without reading any documentation.
#include <QSettings>
#include <memory>

#include "tandem/engine.h"
#include "ui/engine/engine_types.h"

namespace tandem::ui {

enum class ThemeChoice { System, Light, Dark };

// What the model is loaded with: changing any of it needs a reload.
struct EngineSettings {
    QString modelDir;  // empty: the model that ships with Tandem
    int threads = 0;   // 0: all hardware threads
    NumaPolicy numaPolicy = NumaPolicy::Auto;
    CpuKernel cpuKernel = CpuKernel::Auto;
    int gpuDevice = 0;  // -1: CPU only
    int contextLength = 4096;

    bool operator==(const EngineSettings&) const = default;
};

struct SamplingDefaults {
    bool useModelRecommendation = true;  // generation_config.json of the model
    tandem::SamplingOptions sampling;
    int maxNewTokens = 1024;

    bool operator==(const SamplingDefaults& other) const;
};

struct Appearance {
    ThemeChoice theme = ThemeChoice::System;
    int fontPointSize = 0;  // 0: the system's

    bool operator==(const Appearance&) const = default;
};

class AppSettings {
public:
    // Takes the QSettings to use; tests pass an INI file in a temporary folder.
    explicit AppSettings(std::unique_ptr<QSettings> settings);

    EngineSettings engine() const;
    void setEngine(const EngineSettings& engine);
    SamplingDefaults sampling() const;
    void setSampling(const SamplingDefaults& sampling);
    Appearance appearance() const;
    void setAppearance(const Appearance& appearance);
    int defaultDeferral() const;
    void setDefaultDeferral(int experts);

    // The deferral last chosen for a model folder, or the default.
    int deferralForModel(const QString& modelDir) const;
    void setDeferralForModel(const QString& modelDir, int experts);

    QByteArray windowState() const;
    void setWindowState(const QByteArray& state);
    QByteArray windowGeometry() const;
    void setWindowGeometry(const QByteArray& geometry);

    QString fileName() const { return settings_->fileName(); }
    void sync() { settings_->sync(); }

private:
    std::unique_ptr<QSettings> settings_;
};

}  // namespace tandem::ui
