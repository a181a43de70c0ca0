// Settings: defaults that work, values that persist, deferral remembered per model, and the dialog
// showing and returning exactly what it was given.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLocale>
#include <QSettings>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/widgets/settings_dialog.h"

using namespace tandem::ui;

namespace {

std::unique_ptr<QSettings> iniIn(const QTemporaryDir& dir) {
    return std::make_unique<QSettings>(dir.filePath("settings.ini"), QSettings::IniFormat);
}

SettingsValues changedValues() {
    SettingsValues v;
    v.engine.modelDir = "/models/Qwen3-30B-A3B";
    v.engine.threads = 12;
    v.engine.numaPolicy = NumaPolicy::SplitExperts;
    v.engine.cpuKernel = CpuKernel::Avx512;
    v.engine.gpuDevice = -1;
    v.engine.contextLength = 16384;
    v.engine.gpuExpertMemoryGb = 24;
    v.engine.int8Dense = false;
    v.engine.int8KvCache = true;
    v.engine.serverGpuBatch = 4;
    v.sampling.useModelRecommendation = false;
    v.sampling.sampling.temperature = 0.7f;
    v.sampling.sampling.topP = 0.9f;
    v.sampling.sampling.topK = 40;
    v.sampling.sampling.minP = 0.05f;
    v.sampling.sampling.repetitionPenalty = 1.1f;
    v.sampling.maxNewTokens = 2048;
    v.appearance.theme = ThemeChoice::Dark;
    v.appearance.fontPointSize = 13;
    v.hubEndpoint = "https://hf-mirror.example";
    v.defaultDeferral = 2;
    return v;
}

bool sameValues(const SettingsValues& a, const SettingsValues& b) {
    return a.engine == b.engine && a.sampling == b.sampling && a.appearance == b.appearance &&
           a.defaultDeferral == b.defaultDeferral && a.hubEndpoint == b.hubEndpoint;
}

}  // namespace

class SettingsTest : public QObject {
    Q_OBJECT

private slots:
    void defaultsNeedNoConfiguration() {
        QTemporaryDir dir;
        AppSettings settings(iniIn(dir));
        const EngineSettings e = settings.engine();
        QVERIFY(e.modelDir.isEmpty());  // the model that ships with Tandem
        QCOMPARE(e.threads, 0);         // all hardware threads
        QCOMPARE(e.contextLength, 4096);
        QCOMPARE(e.gpuExpertMemoryGb, -1);  // automatic: what the GPU has free
        QVERIFY(e.int8Dense);               // the dense weights in int8
        QVERIFY(!e.int8KvCache);            // the KV cache in float32, exact
        QCOMPARE(e.serverGpuBatch, 1);      // the server on the GPU: one request at a time, no memory reserved
        QCOMPARE(gpuSessionsFor(e, settings.server()), 1);
        QVERIFY(settings.sampling().useModelRecommendation);
        QCOMPARE(settings.appearance().theme, ThemeChoice::System);
        QCOMPARE(settings.defaultDeferral(), 0);  // exact
    }

    void valuesPersistAcrossInstances() {
        QTemporaryDir dir;
        changedValues().write(*std::make_unique<AppSettings>(iniIn(dir)));
        const AppSettings reopened(iniIn(dir));
        QVERIFY(sameValues(SettingsValues::read(reopened), changedValues()));
    }

    void deferralIsRememberedPerModel() {
        QTemporaryDir dir;
        {
            AppSettings settings(iniIn(dir));
            settings.setDefaultDeferral(1);
            settings.setDeferralForModel("/models/a", 3);
            settings.setDeferralForModel("/models/b/", 0);
        }
        const AppSettings settings(iniIn(dir));
        QCOMPARE(settings.deferralForModel("/models/a"), 3);
        QCOMPARE(settings.deferralForModel("/models/b/"), 0);
        QCOMPARE(settings.deferralForModel("/models/c"), 1);  // never set: the default
    }

    void outOfRangeValuesFallBack() {
        QTemporaryDir dir;
        {
            QSettings raw(dir.filePath("settings.ini"), QSettings::IniFormat);
            raw.setValue("engine/threads", -4);
            raw.setValue("engine/numaPolicy", 17);
            raw.setValue("engine/contextLength", 3);
            raw.setValue("engine/gpuExpertMemoryGb", -7);
            raw.setValue("engine/serverGpuBatch", 99);
            raw.setValue("appearance/theme", "purple");
        }
        const AppSettings settings(iniIn(dir));
        QCOMPARE(settings.engine().threads, 0);
        QCOMPARE(settings.engine().numaPolicy, NumaPolicy::Auto);
        QCOMPARE(settings.engine().contextLength, 256);
        QCOMPARE(settings.engine().gpuExpertMemoryGb, -1);
        QCOMPARE(settings.engine().serverGpuBatch, kMaxServerGpuBatch);
        QCOMPARE(settings.appearance().theme, ThemeChoice::System);
    }

    void onlyEngineChangesNeedAReload() {
        const SettingsValues before;
        SettingsValues looks = before;
        looks.appearance.theme = ThemeChoice::Dark;
        looks.sampling.maxNewTokens = 10;
        looks.defaultDeferral = 1;
        QVERIFY(!looks.needsReloadComparedTo(before));
        SettingsValues context = before;
        context.engine.contextLength = 8192;
        QVERIFY(context.needsReloadComparedTo(before));
        SettingsValues device = before;
        device.engine.gpuDevice = -1;
        QVERIFY(device.needsReloadComparedTo(before));
        SettingsValues experts = before;
        experts.engine.gpuExpertMemoryGb = 8;
        QVERIFY(experts.needsReloadComparedTo(before));
        // The server's GPU sessions: reserved only with the server on, so a reload only where that changes.
        SettingsValues batch = before;
        batch.engine.serverGpuBatch = 4;
        QCOMPARE(gpuSessionsFor(batch.engine, batch.server), 1);
        QVERIFY(!batch.needsReloadComparedTo(before));  // the server is off: nothing is reserved either way
        SettingsValues serving = batch;
        serving.server.enabled = true;
        QCOMPARE(gpuSessionsFor(serving.engine, serving.server), 5);
        QVERIFY(serving.needsReloadComparedTo(batch));
        QVERIFY(batch.needsReloadComparedTo(serving));
        SettingsValues plain = before;
        plain.server.enabled = true;
        QVERIFY(!plain.needsReloadComparedTo(before));  // one at a time: the server alone needs no reload
        SettingsValues cpuOnly = serving;
        cpuOnly.engine.gpuDevice = -1;  // CPU only: nothing to reserve, whatever the server does
        QCOMPARE(gpuSessionsFor(cpuOnly.engine, cpuOnly.server), 1);
        SettingsValues cpuOnlyOff = cpuOnly;
        cpuOnlyOff.server.enabled = false;
        QVERIFY(!cpuOnlyOff.needsReloadComparedTo(cpuOnly));
    }

    // The mirror address is kept without a trailing slash and with a scheme, and clearing it goes back
    // to the default.
    void theHubAddressIsASetting() {
        QTemporaryDir dir;
        AppSettings settings(iniIn(dir));
        QVERIFY(settings.hubEndpoint().isEmpty());
        settings.setHubEndpoint("  https://hf-mirror.example//  ");
        QCOMPARE(settings.hubEndpoint(), QStringLiteral("https://hf-mirror.example"));
        settings.setHubEndpoint("hf-mirror.example/");  // as typed without a scheme
        QCOMPARE(settings.hubEndpoint(), QStringLiteral("https://hf-mirror.example"));
        settings.setHubEndpoint("http://127.0.0.1:8080");
        QCOMPARE(settings.hubEndpoint(), QStringLiteral("http://127.0.0.1:8080"));
        settings.setHubEndpoint("");
        QVERIFY(settings.hubEndpoint().isEmpty());
    }

    void dialogShowsAndReturnsTheValues() {
        const SettingsValues values = changedValues();
        SettingsDialog dialog(values, {"NVIDIA H200"});
        QVERIFY(sameValues(dialog.values(), values));
        const auto spins = dialog.findChildren<QSpinBox*>();
        const auto byName = [&](const QString& name) -> QSpinBox* {
            for (QSpinBox* s : spins)
                if (s->accessibleName() == name) return s;
            return nullptr;
        };
        QVERIFY(byName("Context length"));
        byName("Context length")->setValue(2048);
        QCOMPARE(dialog.values().engine.contextLength, 2048);
        // The experts' GPU memory: automatic at its lowest value, a size in GB, 0 for none.
        QSpinBox* experts = byName("GPU memory for experts");
        QVERIFY(experts && experts->isEnabled());
        QCOMPARE(experts->value(), 24);
        experts->setValue(-1);
        QCOMPARE(experts->text(), QStringLiteral("Automatic (what the GPU has free)"));
        QCOMPARE(dialog.values().engine.gpuExpertMemoryGb, -1);
        experts->setValue(0);
        QCOMPARE(dialog.values().engine.gpuExpertMemoryGb, 0);
        // The dense weights in int8: a checkbox that the values follow.
        QCheckBox* int8 = nullptr;
        for (QCheckBox* c : dialog.findChildren<QCheckBox*>())
            if (c->accessibleName() == "Dense weights in int8") int8 = c;
        QVERIFY(int8 && !int8->isChecked());
        int8->setChecked(true);
        QVERIFY(dialog.values().engine.int8Dense);
        // Every GPU found is offered, and CPU only.
        QComboBox* device = nullptr;
        for (QComboBox* c : dialog.findChildren<QComboBox*>())
            if (c->accessibleName() == "Device") device = c;
        QVERIFY(device);
        QCOMPARE(device->count(), 2);
        QVERIFY(device->itemText(1).contains("NVIDIA H200"));
    }

    // The KV cache choice beside the context length: the note under the length shows what each choice costs
    // a conversation at that length, the chosen one first, and the same on the GPU path.
    void kvCacheChoiceShowsWhatEachCosts() {
        SettingsValues values;
        values.engine.contextLength = 8192;
        SettingsDialog dialog(values, {});
        QComboBox* kv = nullptr;
        for (QComboBox* c : dialog.findChildren<QComboBox*>())
            if (c->accessibleName() == "KV cache") kv = c;
        QVERIFY(kv);
        QCOMPARE(kv->currentIndex(), 0);
        QVERIFY(!dialog.values().engine.int8KvCache);
        ModelSummary model;
        model.contextLength = 8192;
        model.maxContextLength = 40960;
        model.kvBytesPerPosition = model.kvBytesPerPositionFloat32 = 196608;  // Qwen3-30B-A3B: 48 layers x 2 x 512 x 4
        model.kvBytesPerPositionInt8 = 50688;                                   // 48 x 2 x (512 + 4 x 4)
        dialog.setInEffect(&model);
        const auto note = [&] {
            for (QLabel* l : dialog.findChildren<QLabel*>())
                if (l->text().contains("KV cache")) return l->text();
            return QString();
        };
        const QLocale locale;
        const QString f32 = locale.formattedDataSize(196608LL * 8192, 1, QLocale::DataSizeSIFormat);
        const QString int8 = locale.formattedDataSize(50688LL * 8192, 1, QLocale::DataSizeSIFormat);
        QVERIFY2(note().contains("Each conversation's KV cache: up to " + f32 + " at"), qPrintable(note()));
        QVERIFY2(note().contains("In int8: " + int8), qPrintable(note()));
        kv->setCurrentIndex(1);
        QVERIFY(dialog.values().engine.int8KvCache);
        QVERIFY2(note().contains("Each conversation's KV cache: up to " + int8 + " at"), qPrintable(note()));
        QVERIFY2(note().contains("In float32: " + f32), qPrintable(note()));
        // The GPU holds the choice too: the same figures.
        model.onGpu = true;
        dialog.setInEffect(&model);
        QVERIFY2(note().contains("Each conversation's KV cache: up to " + int8 + " at"), qPrintable(note()));
        QVERIFY2(note().contains("In float32: " + f32), qPrintable(note()));
        QVERIFY2(!note().contains("not int8"), qPrintable(note()));
        // A model the GPU cannot hold in int8: the engine's reason is in the note, with what the float32 cache
        // it holds instead takes.
        model.kvCacheNotice = "the KV cache is float32, not int8: the GPU's 8-bit KV cache holds MLA latents of up to 1024";
        dialog.setInEffect(&model);
        QVERIFY2(note().contains("In effect: " + model.kvCacheNotice), qPrintable(note()));
        QVERIFY2(note().contains("Each conversation's KV cache: up to " + f32 + " at"), qPrintable(note()));
        QVERIFY2(!note().contains("In float32:"), qPrintable(note()));
    }

    // The Device list: the CPU, each GPU, and with several GPUs every GPU (the layers split across them);
    // the choice is kept. A saved "every GPU" on a machine with one is shown as running on it; a saved
    // GPU that is gone as running on the CPU; either entry goes when another value is shown.
    void deviceChoices() {
        const auto items = [](QComboBox* box) {
            QList<int> data;
            for (int i = 0; i < box->count(); ++i) data << box->itemData(i).toInt();
            return data;
        };
        {
            SettingsDialog dialog(SettingsValues{}, {"NVIDIA RTX 4090", "NVIDIA RTX 3090"});
            QComboBox* device = nullptr;
            for (QComboBox* box : dialog.findChildren<QComboBox*>())
                if (box->accessibleName() == "Device") device = box;
            QVERIFY(device);
            QCOMPARE(items(device), (QList<int>{-1, 0, kFirstGpuDevice, 1, kEveryGpuDevice}));
            QVERIFY2(device->itemText(4).contains("Every GPU (2)"), qPrintable(device->itemText(4)));
            // The default asks for none in particular: the engine takes the GPU with the most memory.
            QCOMPARE(device->currentData().toInt(), 0);
            QVERIFY2(device->currentText().startsWith("Automatic"), qPrintable(device->currentText()));
            // Each GPU can be chosen by number, GPU 0 too (its own value: 0 is automatic).
            QCOMPARE(device->itemText(2), QString("GPU 0: NVIDIA RTX 4090"));
            QCOMPARE(device->itemText(3), QString("GPU 1: NVIDIA RTX 3090"));
            device->setCurrentIndex(4);
            QCOMPARE(dialog.values().engine.gpuDevice, kEveryGpuDevice);
            device->setCurrentIndex(3);
            QCOMPARE(dialog.values().engine.gpuDevice, 1);
            device->setCurrentIndex(2);
            QCOMPARE(dialog.values().engine.gpuDevice, kFirstGpuDevice);
            SettingsValues first;
            first.engine.gpuDevice = kFirstGpuDevice;
            dialog.setValues(first);
            QCOMPARE(device->currentText(), QString("GPU 0: NVIDIA RTX 4090"));
            QCOMPARE(items(device), (QList<int>{-1, 0, kFirstGpuDevice, 1, kEveryGpuDevice}));
        }
        SettingsValues every;
        every.engine.gpuDevice = kEveryGpuDevice;
        SettingsDialog one(every, {"NVIDIA H200"});
        QComboBox* device = nullptr;
        for (QComboBox* box : one.findChildren<QComboBox*>())
            if (box->accessibleName() == "Device") device = box;
        QVERIFY(device);
        QCOMPARE(items(device), (QList<int>{-1, 0, kEveryGpuDevice}));
        QCOMPARE(device->itemText(1), QString("GPU 0: NVIDIA H200"));  // one GPU: named
        QVERIFY2(device->currentText().contains("one found"), qPrintable(device->currentText()));
        QCOMPARE(one.values().engine.gpuDevice, kEveryGpuDevice);
        SettingsValues gone;
        gone.engine.gpuDevice = 3;
        one.setValues(gone);
        QCOMPARE(items(device), (QList<int>{-1, 0, 3}));
        QVERIFY2(device->currentText().contains("not found"), qPrintable(device->currentText()));
        one.setValues(SettingsValues{});
        QCOMPARE(items(device), (QList<int>{-1, 0}));
        // GPU 0 chosen by number on a machine that now has one GPU: that GPU's entry, not "not found".
        SettingsValues first;
        first.engine.gpuDevice = kFirstGpuDevice;
        one.setValues(first);
        QCOMPARE(items(device), (QList<int>{-1, 0}));
        QCOMPARE(device->currentText(), QString("GPU 0: NVIDIA H200"));
        QCOMPARE(one.values().engine.gpuDevice, kFirstGpuDevice);  // unchanged: saved as it was, no reload
        device->setCurrentIndex(0);
        QCOMPARE(one.values().engine.gpuDevice, -1);

        // Kept by the settings store, and nothing below it.
        QTemporaryDir dir;
        AppSettings store(iniIn(dir));
        EngineSettings e;
        e.gpuDevice = kEveryGpuDevice;
        store.setEngine(e);
        QCOMPARE(store.engine().gpuDevice, kEveryGpuDevice);
        e.gpuDevice = kFirstGpuDevice;
        store.setEngine(e);
        QCOMPARE(store.engine().gpuDevice, kFirstGpuDevice);
        e.gpuDevice = -7;  // not a value Tandem writes: automatic
        store.setEngine(e);
        QCOMPARE(store.engine().gpuDevice, 0);
    }

    // A model whose GPU path spans several GPUs: under Device, a line per GPU with its share; one GPU,
    // the CPU or no model add nothing.
    void dialogShowsEachGpusShare() {
        SettingsDialog dialog(SettingsValues{}, {"NVIDIA H200", "NVIDIA H200"});
        auto* stages = dialog.findChild<QWidget*>(QStringLiteral("settingsGpuStages"));
        QVERIFY(stages);
        const auto shown = [&] {
            QStringList texts;
            if (!stages->isVisibleTo(&dialog)) return texts;
            for (QLabel* l : stages->findChildren<QLabel*>())
                if (l->isVisibleTo(&dialog)) texts << l->text();
            return texts;
        };
        QVERIFY(shown().isEmpty());  // no model
        ModelSummary model;
        model.contextLength = 4096;
        model.onGpu = true;
        dialog.setInEffect(&model);
        QVERIFY(shown().isEmpty());  // one GPU
        model.gpuStages = {"GPU 0 (NVIDIA H200): layers 0-23, 9.10 GB dense + KV, 30.20 GB for experts",
                           "GPU 1 (NVIDIA H200): layers 24-47, 8.90 GB dense + KV, 29.80 GB for experts"};
        dialog.setInEffect(&model);
        QCOMPARE(shown().size(), 1);
        const QString text = shown().first();
        QVERIFY2(text.contains("2 GPUs"), qPrintable(text));
        QVERIFY2(text.contains(model.gpuStages[0]) && text.contains(model.gpuStages[1]), qPrintable(text));
        QVERIFY2(text.indexOf(model.gpuStages[0]) < text.indexOf(model.gpuStages[1]), qPrintable(text));
        model.gpuStages = {model.gpuStages[0]};
        dialog.setInEffect(&model);
        QVERIFY(shown().isEmpty());
        dialog.setInEffect(nullptr);
        QVERIFY(shown().isEmpty());
    }
};

QTEST_MAIN(SettingsTest)
#include "tst_settings.moc"
