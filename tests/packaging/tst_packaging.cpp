// The files the package installs, checked where they are made: the desktop entry and the AppStream
// metainfo pass their validators and agree with each other and the project, the icon is rendered at
// every hicolor size, and the git revision script says what the source is.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include "packaging_support.h"
#include "test_support.h"

using namespace tandem;

namespace {

const QString kAppId = QStringLiteral("io.github.tandem.Tandem");

QString resource(const QString& name) { return QStringLiteral(TANDEM_SOURCE_DIR "/resources/") + name; }

// The [Desktop Entry] group as key -> value.
QMap<QString, QString> desktopEntry(const QString& path) {
    QMap<QString, QString> entry;
    for (const QString& line : QString::fromUtf8(test::readFile(path)).split('\n')) {
        const int eq = line.indexOf('=');
        if (eq > 0 && !line.startsWith('#')) entry.insert(line.left(eq), line.mid(eq + 1));
    }
    return entry;
}

struct Metainfo {
    QString id, launchable, firstReleaseVersion;
    QStringList binaries;
};

Metainfo readMetainfo(const QString& path) {
    Metainfo m;
    QXmlStreamReader xml(test::readFile(path));
    while (!xml.atEnd()) {
        if (xml.readNext() != QXmlStreamReader::StartElement) continue;
        const auto name = xml.name();
        if (name == QLatin1String("id")) m.id = xml.readElementText();
        else if (name == QLatin1String("launchable")) m.launchable = xml.readElementText();
        else if (name == QLatin1String("binary")) m.binaries << xml.readElementText();
        else if (name == QLatin1String("release") && m.firstReleaseVersion.isEmpty())
            m.firstReleaseVersion = xml.attributes().value(QLatin1String("version")).toString();
    }
    return m;
}

QString git(const QString& repo, const QStringList& args) {
    const auto run = test::runProgram("git", QStringList{"-C", repo, "-c", "user.name=Tandem Test", "-c",
                                                         "user.email=test@tandem.invalid"} + args);
    return run.exitCode == 0 ? run.out.trimmed() : QStringLiteral("<git failed: %1>").arg(run.err);
}

// Runs cmake/WriteRevision.cmake for SOURCE and returns the revision it wrote to OUTPUT.
QString writtenRevision(const QString& source, const QString& output) {
    const auto run = test::runProgram(TANDEM_CMAKE, {"-DSOURCE_DIR=" + source, "-DOUTPUT=" + output, "-P",
                                                     TANDEM_SOURCE_DIR "/cmake/WriteRevision.cmake"});
    if (run.exitCode != 0) return "<cmake failed: " + run.describe() + ">";
    const auto match = QRegularExpression("#define TANDEM_GIT_REVISION \"([^\"]*)\"").match(test::readFile(output));
    return match.hasMatch() ? match.captured(1) : QStringLiteral("<no revision in the header>");
}

}  // namespace

class PackagingTest : public QObject {
    Q_OBJECT

private slots:
    void desktopEntryValidates() {
        const QString validate = test::requireTool("desktop-file-validate", "desktop-file-utils");
        if (validate.isEmpty()) return;
        const auto run = test::runProgram(validate, {resource(kAppId + ".desktop")});
        QVERIFY2(run.exitCode == 0 && run.out.trimmed().isEmpty(), qPrintable(run.describe()));
    }

    void metainfoValidatesStrictly() {
        const QString appstream = test::requireTool("appstreamcli", "appstream");
        if (appstream.isEmpty()) return;
        // --strict fails on warnings too; --no-net because a test must not need the network.
        const auto run = test::runProgram(appstream, {"validate", "--no-net", "--strict", resource(kAppId + ".metainfo.xml")});
        QVERIFY2(run.exitCode == 0, qPrintable(run.describe()));
    }

    void desktopEntryAndMetainfoAgree() {
        const auto entry = desktopEntry(resource(kAppId + ".desktop"));
        QCOMPARE(entry.value("Exec"), QStringLiteral("tandem"));
        QCOMPARE(entry.value("Icon"), kAppId);
        // Qt names the X11 window class after the application name, which app/tandem_main.cpp sets.
        QCOMPARE(entry.value("StartupWMClass"), QStringLiteral("tandem"));
        const Metainfo m = readMetainfo(resource(kAppId + ".metainfo.xml"));
        QCOMPARE(m.id, kAppId);
        QCOMPARE(m.launchable, kAppId + ".desktop");
        QCOMPARE(m.binaries, QStringList({"tandem", "tandem-cli"}));
        // A version bump in CMakeLists.txt needs its release notes here.
        QCOMPARE(m.firstReleaseVersion, QStringLiteral(TANDEM_PROJECT_VERSION));
        QVERIFY(QFileInfo::exists(resource("icons/" + kAppId + ".svg")));
    }

    void iconIsRenderedAtEverySize() {
        const QStringList sizes = QStringLiteral(TANDEM_ICON_SIZES).split(' ');
        QVERIFY(sizes.contains("16") && sizes.contains("512"));
        for (const QString& size : sizes) {
            const QString png = QStringLiteral(TANDEM_BUILD_DIR "/share/icons/hicolor/%1x%1/apps/%2.png").arg(size, kAppId);
            const QImage image(png);
            QVERIFY2(!image.isNull(), qPrintable(png));
            QCOMPARE(image.size(), QSize(size.toInt(), size.toInt()));
            // Drawn, not blank: the rounded corner is transparent and the middle is opaque.
            QCOMPARE(qAlpha(image.pixel(0, 0)), 0);
            QCOMPARE(qAlpha(image.pixel(image.width() / 2, image.height() / 2)), 255);
        }
    }

    void revisionIsUnknownOutsideAGitCheckout() {
        QTemporaryDir source, out;
        QCOMPARE(writtenRevision(source.path(), out.filePath("rev.h")), QStringLiteral("unknown"));
    }

    void revisionIsTheCommitAndSaysWhenDirty() {
        QTemporaryDir repo, out;
        QVERIFY(test::writeFile(repo.filePath("file.txt"), "one\n"));
        git(repo.path(), {"init", "-q"});
        git(repo.path(), {"add", "file.txt"});
        git(repo.path(), {"commit", "-q", "-m", "first"});
        const QString commit = git(repo.path(), {"rev-parse", "--short=12", "HEAD"});
        QVERIFY2(QRegularExpression("^[0-9a-f]{12}$").match(commit).hasMatch(), qPrintable(commit));
        const QString header = out.filePath("rev.h");
        QCOMPARE(writtenRevision(repo.path(), header), commit);

        // Unchanged: the header is not rewritten, so nothing that includes it rebuilds.
        QFile file(header);
        QVERIFY(file.open(QIODevice::ReadWrite));
        const QDateTime old = QDateTime::fromSecsSinceEpoch(1000000000);
        QVERIFY(file.setFileTime(old, QFileDevice::FileModificationTime));
        file.close();
        QCOMPARE(writtenRevision(repo.path(), header), commit);
        QCOMPARE(QFileInfo(header).lastModified(), old);

        QVERIFY(test::writeFile(repo.filePath("file.txt"), "two\n"));
        QCOMPARE(writtenRevision(repo.path(), header), commit + "-dirty");
    }
};

QTEST_MAIN(PackagingTest)
#include "tst_packaging.moc"
