// Settings that tell the truth (issue 24, item 9): the dialog shows what is in effect next to what was
// asked for (a context length the model caps, the threads and device in use), offers no CPU kernel this
// machine cannot run and no GPU that is not there, fits its tabs; the dashboard counts threads in
// English.
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTabBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include "tandem/build_info.h"
#include "test_support.h"
#include "ui/models/stats_model.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/settings_dialog.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

template <typename T>
T* childNamed(QWidget* parent, const QString& accessibleName) {
    for (T* w : parent->findChildren<T*>())
        if (w->accessibleName() == accessibleName) return w;
    return nullptr;
}

QStringList labelTexts(QWidget* parent) {
    QStringList texts;
    for (QLabel* label : parent->findChildren<QLabel*>()) texts << label->text();
    return texts;
}

bool itemEnabled(QComboBox* box, int row) {
    auto* model = qobject_cast<QStandardItemModel*>(box->model());
    return model && model->item(row) && model->item(row)->isEnabled();
}

// A copy of the fixture that holds at most `tokens` of context.
bool copyWithContextLimit(const QString& dir, int tokens) {
    if (!test::copyFixture(QStringLiteral("tiny-qwen3moe"), dir)) return false;
    QJsonObject config = QJsonDocument::fromJson(test::readFile(dir + QStringLiteral("/config.json"))).object();
    config[QStringLiteral("max_position_embeddings")] = tokens;
    return test::writeFile(dir + QStringLiteral("/config.json"), QJsonDocument(config).toJson());
}

// The CPU kernels of the settings' list (Automatic, AMX, AVX-512, AVX2) and the engine's names.
const char* const kKernelNames[] = {"", "amx", "avx512", "avx2"};

int kernelLevel(const std::string& name) {
    const std::string names[] = {"scalar", "avx2", "avx512", "amx"};
    for (int i = 0; i < 4; ++i)
        if (name == names[i]) return i;
    return -1;
}

}  // namespace

class SettingsEffectTest : public QObject {
    Q_OBJECT

private slots:
    void theDialogShowsTheContextLengthInEffect() {
        QTemporaryDir dir, model;
        QVERIFY(copyWithContextLimit(model.path(), 2048));
        auto options = test::appOptions(dir);
        options.embeddedModelDir = model.path();
        TandemApp app(std::move(options));
        app.start();
        app.window()->show();
        QVERIFY(test::waitForModel(app));
        QCOMPARE(app.settings()->engine().contextLength, 4096);
        QCOMPARE(app.model()->summary().contextLength, 2048);

        QStringList texts;
        int threadsInUse = app.model()->summary().threads;
        QString threadsShown;
        bool noteFits = false;
        QTimer::singleShot(0, [&] {
            QTRY_VERIFY(QApplication::activeModalWidget() != nullptr);
            QWidget* dialog = QApplication::activeModalWidget();
            texts = labelTexts(dialog);
            // The context note wraps over lines and is given their height (not clipped to one line).
            for (auto* label : dialog->findChildren<QLabel*>())
                if (label->text().contains("KV cache")) noteFits = label->height() >= label->heightForWidth(label->width());
            if (auto* threads = childNamed<QSpinBox>(dialog, "CPU threads")) threadsShown = threads->specialValueText();
            qobject_cast<QDialog*>(dialog)->reject();
        });
        app.window()->openSettings();
        const QString all = texts.join(QLatin1Char('\n'));
        QVERIFY2(all.contains("2,048") || all.contains("2048"), qPrintable(all));
        // What the length costs: the KV cache at the length in effect (the setting's 4096 capped at the
        // model's 2048).
        const ModelSummary& summary = app.model()->summary();
        QCOMPARE(summary.maxContextLength, 2048);
        QVERIFY(summary.kvBytesPerPosition > 0);
        const QString size = QLocale().formattedDataSize(static_cast<qint64>(summary.kvBytesPerPosition * 2048), 1,
                                                         QLocale::DataSizeSIFormat);
        QVERIFY2(all.contains("Each conversation's KV cache: up to " + size), qPrintable(all + "\n" + size));
        QVERIFY(noteFits);
        QVERIFY2(threadsShown.contains(QString::number(threadsInUse)), qPrintable(threadsShown));
    }

    void kernelsThisCpuCannotRunAreNotOffered() {
        const tandem::BuildInfo& build = tandem::buildInfo();
        if (build.cpuKernelSource != "best for this CPU") QSKIP("TANDEM_CPU_ISA chooses the kernel in this run");
        const int best = kernelLevel(build.cpuKernel);
        QVERIFY2(best >= 0, build.cpuKernel.c_str());
        SettingsDialog dialog(SettingsValues{}, QStringList{});
        auto* kernel = childNamed<QComboBox>(&dialog, "CPU kernel");
        QVERIFY(kernel);
        QCOMPARE(kernel->count(), 4);
        QVERIFY(itemEnabled(kernel, 0));
        for (int row = 1; row < 4; ++row) {
            const bool runs = kernelLevel(kKernelNames[row]) <= best;
            QVERIFY2(itemEnabled(kernel, row) == runs, qPrintable(kernel->itemText(row)));
            if (!runs) QVERIFY2(kernel->itemText(row).contains("not"), qPrintable(kernel->itemText(row)));
        }
        // Automatic names the kernel it runs.
        QString name = QString::fromStdString(build.cpuKernel).toUpper();
        name.replace("AVX512", "AVX-512");
        QVERIFY2(kernel->itemText(0).contains(name), qPrintable(kernel->itemText(0)));

        // A kernel saved on another machine shows, flagged, and is not taken for one this CPU runs.
        if (best < 3) {
            SettingsValues amx;
            amx.engine.cpuKernel = CpuKernel::Amx;
            SettingsDialog other(amx, QStringList{});
            auto* box = childNamed<QComboBox>(&other, "CPU kernel");
            QCOMPARE(box->currentIndex(), 1);
            const QString all = labelTexts(&other).join('\n');
            QVERIFY2(all.contains("cannot run AMX") || all.contains("lacks AMX") || all.contains("no AMX"), qPrintable(all));
        }
    }

    void withoutAGpuTheDeviceSaysTheCpu() {
        SettingsDialog dialog(SettingsValues{}, QStringList{});
        auto* device = childNamed<QComboBox>(&dialog, "Device");
        QVERIFY(device);
        for (int i = 0; i < device->count(); ++i)
            QVERIFY2(!device->itemText(i).startsWith("GPU 0"), qPrintable(device->itemText(i)));
        QVERIFY2(device->currentText().contains("CPU"), qPrintable(device->currentText()));
        QVERIFY2(device->currentText().contains("no GPU"), qPrintable(device->currentText()));
    }

    void theTabsFitTheDialog() {
        SettingsDialog dialog(SettingsValues{}, QStringList{"NVIDIA H200"});
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        auto* tabs = dialog.findChild<QTabWidget*>();
        QVERIFY(tabs);
        QTabBar* bar = tabs->tabBar();
        for (int i = 0; i < bar->count(); ++i)
            QVERIFY2(bar->rect().contains(bar->tabRect(i)),
                     qPrintable(QStringLiteral("tab %1 (%2) is cut off: %3 px of %4").arg(i).arg(bar->tabText(i))
                                    .arg(bar->tabRect(i).right()).arg(bar->width())));
    }

    // A label with an Alt shortcut ("CPU &kernel:") names its field, so the "&" is no literal character.
    void everyShortcutLabelHasItsField() {
        SettingsDialog dialog(SettingsValues{}, QStringList{"NVIDIA H200"});
        for (QLabel* label : dialog.findChildren<QLabel*>())
            if (label->text().contains(QLatin1Char('&')))
                QVERIFY2(label->buddy() != nullptr, qPrintable(label->text() + " shows its & as it is"));
    }

    void theDashboardCountsThreadsInEnglish() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        ModelSummary summary;
        summary.name = "moe";
        summary.modelType = "qwen3_moe";
        summary.threads = 1;
        dashboard.setModel(&summary, 0);
        const QString all = labelTexts(&dashboard).join('\n');
        QVERIFY2(all.contains("1 thread") && !all.contains("1 threads"), qPrintable(all));
        summary.threads = 8;
        dashboard.setModel(&summary, 0);
        QVERIFY(labelTexts(&dashboard).join('\n').contains("8 threads"));
    }
};

QTEST_MAIN(SettingsEffectTest)
#include "tst_settings_effect.moc"
