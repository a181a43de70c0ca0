// What the window says about the model agrees with itself (issue 24, item 7): the message box stops
// saying "loading" once the model is ready (at start and after a settings reload), the empty chat's
// text is shown whole, and the dashboard does not keep a decode speed once the model is gone.
#include <QDir>
#include <QEvent>
#include <QLabel>
#include <QLocale>
#include <QPaintEvent>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/models/stats_model.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/empty_state_page.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/settings_dialog.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

// Records the placeholder text each time the message box's text area is painted whole: what the user
// last saw. The cursor's blink repaints a sliver only, leaving the placeholder painted before on screen.
class PaintWatcher : public QObject {
public:
    explicit PaintWatcher(QPlainTextEdit* edit) : edit_(edit) { edit_->viewport()->installEventFilter(this); }
    QString lastPainted() const { return lastPainted_; }
    int paints() const { return paints_; }

protected:
    bool eventFilter(QObject*, QEvent* event) override {
        if (event->type() == QEvent::Paint &&
            static_cast<QPaintEvent*>(event)->rect().width() >= edit_->viewport()->width() / 2) {
            lastPainted_ = edit_->toPlainText().isEmpty() ? edit_->placeholderText() : QString();
            ++paints_;
        }
        return false;
    }

private:
    QPlainTextEdit* edit_;
    QString lastPainted_;
    int paints_ = 0;
};

std::unique_ptr<TandemApp> startGated(const QTemporaryDir& dir, std::shared_ptr<test::ModelGate> gate,
                                      std::optional<QString> embedded = std::nullopt) {
    auto options = test::appOptions(dir, test::gatedModelLoader(gate));
    if (embedded) options.embeddedModelDir = *embedded;
    auto app = std::make_unique<TandemApp>(std::move(options));
    test::limitAnswers(*app);
    return app;
}

// Holds the next load until the message box has been painted saying so, then lets it finish.
bool loadAfterLoadingWasPainted(TandemApp& app, test::ModelGate& gate, PaintWatcher& watcher) {
    if (!gate.reached.tryAcquire(1, 60000)) return false;
    const bool painted = QTest::qWaitFor([&] { return watcher.lastPainted().contains("loading"); }, 10000);
    gate.release.release();
    return painted && test::waitForModel(app);
}

}  // namespace

class AppStatusTest : public QObject {
    Q_OBJECT

private slots:
    void theMessageBoxStopsSayingLoadingOnceTheModelIsReady() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        gate->holdLoad = true;
        auto app = startGated(dir, gate);
        PaintWatcher watcher(app->window()->composer()->editor());
        app->start();
        app->window()->show();
        QVERIFY(loadAfterLoadingWasPainted(*app, *gate, watcher));
        QPlainTextEdit* edit = app->window()->composer()->editor();
        QVERIFY(!edit->placeholderText().contains("loading"));
        QVERIFY2(QTest::qWaitFor([&] { return watcher.lastPainted() == edit->placeholderText(); }, 2000),
                 qPrintable("on screen: " + watcher.lastPainted()));

        // A reload after a settings change: the same again.
        SettingsValues values = SettingsValues::read(*app->settings());
        values.engine.contextLength = 2048;
        QVERIFY(app->window()->applySettings(values));
        gate->holdLoad = true;
        app->model()->loadConfigured();
        QVERIFY(loadAfterLoadingWasPainted(*app, *gate, watcher));
        QVERIFY2(QTest::qWaitFor([&] { return watcher.lastPainted() == edit->placeholderText(); }, 2000),
                 qPrintable("on screen: " + watcher.lastPainted()));
    }

    void theEmptyChatSaysItsTextWhole() {
        QTemporaryDir dir, model;
        // A store's name, as long as the ones the wizard makes.
        const QString folder = model.filePath("tiny-qwen3moe-bf16");
        QVERIFY(QDir().mkpath(folder));
        QVERIFY(test::copyFixture("tiny-qwen3moe", folder));
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startGated(dir, gate, folder);
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        for (const QSize size : {QSize(1360, 860), QSize(1000, 700), QSize(800, 600)}) {
            app->window()->resize(size);
            QTRY_COMPARE(app->window()->emptyState()->mode(), EmptyStatePage::Mode::Ready);
            QVERIFY(app->window()->emptyState()->isVisible());
            QTest::qWait(20);
            QLabel* detail = nullptr;
            for (QLabel* label : app->window()->emptyState()->findChildren<QLabel*>())
                if (label->text().contains("is ready")) detail = label;
            QVERIFY(detail && detail->isVisible());
            QVERIFY(detail->text().contains("tiny-qwen3moe-bf16"));
            QVERIFY2(detail->height() >= detail->heightForWidth(detail->width()),
                     qPrintable(QStringLiteral("%1 px wide, %2 px high, needs %3 at %4x%5")
                                    .arg(detail->width())
                                    .arg(detail->height())
                                    .arg(detail->heightForWidth(detail->width()))
                                    .arg(size.width())
                                    .arg(size.height())));
        }
    }

    void theDashboardForgetsTheSpeedWhenTheModelGoes() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startGated(dir, gate);
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        test::typeAndSend(*app, "How fast?");
        // The answer's speed arrives with its end (an idle check alone can come before the answer starts,
        // as CI once saw on a loaded machine).
        QTRY_VERIFY_WITH_TIMEOUT(app->stats()->latestDecodeRate() > 0, 60000);
        QVERIFY(test::waitForIdle(*app));
        app->stats()->addSample(SystemSample{});
        const double speed = app->stats()->latestDecodeRate();
        QVERIFY(speed > 0);
        const QString shown = QLocale().toString(speed, 'f', 1);
        Dashboard* dashboard = app->window()->dashboard();
        QVERIFY2(dashboard->decodeReading().contains(shown), qPrintable(dashboard->decodeReading()));

        // The model goes (reloaded): its speed is no longer what the dashboard says.
        gate->holdLoad = true;
        app->model()->loadConfigured();
        QVERIFY(gate->reached.tryAcquire(1, 60000));
        app->stats()->addSample(SystemSample{});
        QVERIFY2(!dashboard->decodeReading().contains(shown), qPrintable(dashboard->decodeReading()));
        gate->release.release();
        QVERIFY(test::waitForModel(*app));
        app->stats()->addSample(SystemSample{});
        QVERIFY2(!dashboard->decodeReading().contains(shown), qPrintable(dashboard->decodeReading()));
    }
};

QTEST_MAIN(AppStatusTest)
#include "tst_app_status.moc"
