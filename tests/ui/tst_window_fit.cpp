// Small and high-DPI screens (issue 24, item 8): the window can be made 800x600 with the conversations
// and the dashboard shown and everything still in reach, both side panels collapse, and a saved size or
// place that does not fit this screen (a size saved at another scale factor, a screen that went away)
// comes back on the screen. CTest runs this suite twice: on the offscreen platform's own screen, and on
// a 2880x1800 screen at QT_SCALE_FACTOR=2 (1440x900 logical pixels).
#include <QAction>
#include <QDockWidget>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/conversation_sidebar.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/main_window.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

// The window geometry a window of `geometry` saves, as an earlier session would have left it.
QByteArray savedGeometry(const QRect& geometry) {
    QWidget probe;
    probe.setGeometry(geometry);
    return probe.saveGeometry();
}

void saveGeometry(const QTemporaryDir& dir, const QByteArray& geometry) {
    AppSettings settings(std::make_unique<QSettings>(dir.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat));
    settings.setWindowGeometry(geometry);
    settings.sync();
}

QString describe(const QRect& r) {
    return QStringLiteral("%1x%2 at %3,%4").arg(r.width()).arg(r.height()).arg(r.x()).arg(r.y());
}

// Whether `w` is shown whole inside its window.
bool wholeInWindow(QWidget* w) {
    const QRect inWindow(w->mapTo(w->window(), QPoint(0, 0)), w->size());
    return w->isVisible() && w->window()->rect().contains(inWindow);
}

}  // namespace

class WindowFitTest : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        qInfo("screen: %s, device pixel ratio %.1f", qPrintable(describe(screen)),
              QGuiApplication::primaryScreen()->devicePixelRatio());
    }

    void theWindowGoesDownTo800x600WithBothPanelsShown() {
        QTemporaryDir dir;
        auto app = test::startApp(dir);
        QVERIFY(test::waitForModel(*app));
        MainWindow* w = app->window();
        QVERIFY(w->findChild<QDockWidget*>("dashboardDock")->isVisible());
        QVERIFY(w->sidebar()->isVisible());
        const QSize least = w->minimumSizeHint().expandedTo(w->minimumSize());
        QVERIFY2(least.width() <= 800 && least.height() <= 600,
                 qPrintable(QStringLiteral("the window cannot be smaller than %1x%2").arg(least.width()).arg(least.height())));

        w->resize(800, 600);
        QTRY_COMPARE(w->size(), QSize(800, 600));
        QTest::qWait(20);
        // Everything needed to chat is in reach.
        QVERIFY(wholeInWindow(w->composer()->button()));
        QVERIFY(wholeInWindow(w->composer()->editor()));
        QVERIFY(w->composer()->editor()->width() >= 200);
        QVERIFY(wholeInWindow(w->sidebar()));
    }

    void bothSidePanelsCollapse() {
        QTemporaryDir dir;
        auto app = test::startApp(dir);
        MainWindow* w = app->window();
        auto* conversations = w->findChild<QAction*>("showConversationsAction");
        auto* dashboard = w->findChild<QDockWidget*>("dashboardDock")->toggleViewAction();
        QVERIFY(conversations && conversations->isCheckable() && conversations->isChecked());
        QVERIFY(dashboard->isChecked());
        conversations->trigger();
        QTRY_VERIFY(!w->sidebar()->isVisible());
        dashboard->trigger();
        QTRY_VERIFY(!w->dashboard()->isVisible());
        // The chat alone needs little room.
        QVERIFY(w->minimumSizeHint().width() <= 520);
        conversations->trigger();
        QTRY_VERIFY(w->sidebar()->isVisible());
        // The sidebar can also be dragged shut, and the choice outlives a restart.
        auto* splitter = w->findChild<QSplitter*>("mainSplitter");
        QVERIFY(splitter->isCollapsible(0));
        conversations->trigger();
        QTRY_VERIFY(!w->sidebar()->isVisible());
        w->close();
        app.reset();
        app = test::startApp(dir);
        QVERIFY(!app->window()->sidebar()->isVisible());
        QVERIFY(!app->window()->findChild<QAction*>("showConversationsAction")->isChecked());
    }

    void theFirstWindowFitsTheScreen() {
        QTemporaryDir dir;
        auto app = test::startApp(dir);
        MainWindow* w = app->window();
        const QRect screen = w->screen()->availableGeometry();
        QTRY_VERIFY2(screen.contains(w->frameGeometry()),
                     qPrintable(describe(w->frameGeometry()) + " on " + describe(screen)));
    }

    void aSavedSizeTooLargeForThisScreenIsBroughtOnScreen() {
        QTemporaryDir dir;
        // Saved at scale factor 1 on a 2880x1800 screen, now shown on a smaller (or scaled) one.
        saveGeometry(dir, savedGeometry(QRect(80, 40, 2720, 1720)));
        auto app = test::startApp(dir);
        MainWindow* w = app->window();
        const QRect screen = w->screen()->availableGeometry();
        QTRY_VERIFY2(screen.contains(w->frameGeometry()),
                     qPrintable(describe(w->frameGeometry()) + " on " + describe(screen)));
        QVERIFY(wholeInWindow(w->composer()->button()));
    }

    void aSavedPlaceOffTheScreenIsBroughtOnScreen() {
        QTemporaryDir dir;
        // A second screen on the right that is not there any more.
        saveGeometry(dir, savedGeometry(QRect(4000, 2500, 700, 500)));
        auto app = test::startApp(dir);
        MainWindow* w = app->window();
        const QRect screen = w->screen()->availableGeometry();
        QTRY_VERIFY2(screen.contains(w->frameGeometry()),
                     qPrintable(describe(w->frameGeometry()) + " on " + describe(screen)));
    }
};

QTEST_MAIN(WindowFitTest)
#include "tst_window_fit.moc"
