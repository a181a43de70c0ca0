#pragma once
// What the app can give the model wizard in place of the real thing (the tests: a scripted downloader,
// made-up machine figures). Declared apart from the wizard so that the window and the app's wiring carry
// them without including the wizard, the Hub client or the quantization advice.
#include <QString>
#include <functional>
#include <memory>

namespace tandem::ui {

class ModelDownloader;  // ui/wizard/model_downloader.h
struct MachineFigures;  // ui/wizard/quantization_advice.h

using ModelDownloaderFactory = std::function<std::unique_ptr<ModelDownloader>()>;
using MachineFiguresProvider = std::function<MachineFigures(int gpuDevice, const QString& folder)>;

}  // namespace tandem::ui
