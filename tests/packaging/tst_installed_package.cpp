// The package as a user gets it: cpack makes the .deb and the .tar.gz from the build, the .deb is
// unpacked into an empty root (what dpkg would install), and the installed programs run from there:
// `tandem-cli --version`, and `tandem --screenshot`, which must find the default model installed
// beside it. Its Depends must come from the binaries and never pull in CUDA.
#include <QDir>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include "packaging_support.h"
#include "test_support.h"

using namespace tandem;

namespace {

const QString kAppId = QStringLiteral("io.github.tandem.Tandem");
const QString kVersion = QStringLiteral(TANDEM_PROJECT_VERSION);

// Only what the package itself brings: no fixtures or default model from the test's environment.
QProcessEnvironment isolatedEnvironment(const QTemporaryDir& home) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("TANDEM_DEFAULT_MODEL");
    env.remove("TANDEM_FIXTURES");
    env.insert("QT_QPA_PLATFORM", "offscreen");
    env.insert("XDG_CONFIG_HOME", home.filePath("config"));
    env.insert("XDG_DATA_HOME", home.filePath("data"));
    return env;
}

}  // namespace

class InstalledPackageTest : public QObject {
    Q_OBJECT

    QTemporaryDir work_;
    QString deb_;
    QString root_;     // the .deb unpacked: root_/usr/bin/tandem, ...
    QString tarball_;  // the .tar.gz unpacked: tarball_/bin/tandem, ...

    QString installed(const QString& path) const { return root_ + "/usr/" + path; }

    QString debField(const QString& field) const {
        return test::runProgram("dpkg-deb", {"--field", deb_, field}).out.trimmed();
    }

private slots:
    void initTestCase() {
        QVERIFY(work_.isValid());
        const QString out = work_.filePath("packages");
        const auto cpack = test::runProgram(TANDEM_CPACK, {"--config", TANDEM_BUILD_DIR "/CPackConfig.cmake", "-G",
                                                           "DEB;TGZ", "-B", out});
        QVERIFY2(cpack.exitCode == 0, qPrintable(cpack.describe()));

        const QStringList debs = QDir(out).entryList({"tandem_" + kVersion + "_*.deb"}, QDir::Files);
        QCOMPARE(debs.size(), 1);
        deb_ = out + "/" + debs.first();
        root_ = work_.filePath("root");
        const auto unpack = test::runProgram("dpkg-deb", {"--extract", deb_, root_});
        QVERIFY2(unpack.exitCode == 0, qPrintable(unpack.describe()));

        const QStringList tgzs = QDir(out).entryList({"tandem-" + kVersion + "-*.tar.gz"}, QDir::Files);
        QCOMPARE(tgzs.size(), 1);
        QDir().mkpath(work_.filePath("tarball"));
        const auto untar = test::runProgram("tar", {"-xzf", out + "/" + tgzs.first(), "-C", work_.filePath("tarball")});
        QVERIFY2(untar.exitCode == 0, qPrintable(untar.describe()));
        tarball_ = work_.filePath("tarball/" + tgzs.first().chopped(QStringLiteral(".tar.gz").size()));
    }

    void debHoldsTheAppAndItsFiles() {
        for (const QString& path :
             QStringList{"bin/tandem", "bin/tandem-cli", "share/applications/" + kAppId + ".desktop",
              "share/metainfo/" + kAppId + ".metainfo.xml", "share/icons/hicolor/scalable/apps/" + kAppId + ".svg",
              "share/icons/hicolor/48x48/apps/" + kAppId + ".png", "share/icons/hicolor/512x512/apps/" + kAppId + ".png",
              QStringLiteral("share/tandem/models/" TANDEM_DEFAULT_MODEL_NAME "/config.json"),
              QStringLiteral("share/tandem/models/" TANDEM_DEFAULT_MODEL_NAME "/tokenizer.json")})
            QVERIFY2(QFileInfo::exists(installed(path)), qPrintable(path));
        QVERIFY(QFileInfo(installed("bin/tandem")).isExecutable());
        // The fixtures' reference outputs are test data, not part of a model.
        const QDir model(installed("share/tandem/models/" TANDEM_DEFAULT_MODEL_NAME));
        QCOMPARE(model.entryList({"golden*"}, QDir::Files), QStringList());
        QCOMPARE(debField("Package"), QStringLiteral("tandem"));
        QCOMPARE(debField("Version"), kVersion);
    }

    void dependsComeFromTheBinariesAndCudaIsOnlyRecommended() {
        const QString depends = debField("Depends");
        // dpkg-shlibdeps' work, with versions, plus the Qt plugins loaded at run time and the fonts.
        for (const char* package : {"libqt6widgets6 (>=", "libqt6charts6 (>=", "libnuma1 (>=", "libpcre2-8-0 (>=",
                                    "libutf8proc2 (>=", "libc6 (>=", "qt6-qpa-plugins", "libqt6sql6-sqlite",
                                    "fonts-dejavu-core", "fonts-noto-color-emoji"})
            QVERIFY2(depends.contains(package), qPrintable(package + QStringLiteral(" not in: ") + depends));
        QVERIFY2(!depends.contains("cuda") && !depends.contains("cublas"), qPrintable(depends));
        const QString recommends = debField("Recommends");
        QCOMPARE(recommends.contains("cublas"), bool(TANDEM_WITH_CUDA));

        // The binaries start without any CUDA library: none is a load-time dependency.
        const QString readelf = test::requireTool("readelf", "binutils");
        if (readelf.isEmpty()) return;
        for (const QString& program : QStringList{"bin/tandem", "bin/tandem-cli"}) {
            const auto run = test::runProgram(readelf, {"--dynamic", installed(program)});
            QVERIFY2(run.exitCode == 0 && run.out.contains("(NEEDED)"), qPrintable(run.describe()));
            for (const char* library : {"libcudart", "libcublas", "libcuda."})
                QVERIFY2(!run.out.contains(library), qPrintable(program + " needs " + library));
        }
    }

    void installedCliReportsItsVersion() {
        QTemporaryDir home;
        const auto run = test::runProgram(installed("bin/tandem-cli"), {"--version"}, isolatedEnvironment(home));
        QVERIFY2(run.exitCode == 0, qPrintable(run.describe()));
        QVERIFY2(run.out.startsWith("tandem-cli " + kVersion + " ("), qPrintable(run.out));
        QVERIFY(run.out.contains(bool(TANDEM_WITH_CUDA) ? "\nGPU path: CUDA " : "\nGPU path: not built (CPU only)\n"));
        QVERIFY(run.out.contains("\nCPU kernels built: scalar, avx2, avx512, amx\n"));
        QVERIFY(run.out.contains("\nCPU kernel used: "));
    }

    void installedAppTakesAScreenshotWithItsDefaultModel() {
        QTemporaryDir home;
        const QString shot = home.filePath("shot.png");
        const auto run = test::runProgram(installed("bin/tandem"), {"--screenshot", shot}, isolatedEnvironment(home));
        QVERIFY2(run.exitCode == 0, qPrintable(run.describe()));
        QVERIFY2(run.out.contains("wrote " + shot), qPrintable(run.describe()));
        // The model came from <root>/usr/share/tandem/models, found relative to the installed binary.
        QVERIFY2(!run.err.contains("no default model loaded"), qPrintable(run.describe()));
        const QImage image(shot);
        QCOMPARE(image.size(), QSize(1440, 900));
        const auto version = test::runProgram(installed("bin/tandem"), {"--version"}, isolatedEnvironment(home));
        QVERIFY2(version.exitCode == 0 && version.out.startsWith("tandem " + kVersion + " (") &&
                     version.out.contains("\nQt: "),
                 qPrintable(version.describe()));
    }

    void installedDesktopFilesValidate() {
        const QString validate = test::requireTool("desktop-file-validate", "desktop-file-utils");
        const QString appstream = test::requireTool("appstreamcli", "appstream");
        if (validate.isEmpty() || appstream.isEmpty()) return;
        const auto desktop = test::runProgram(validate, {installed("share/applications/" + kAppId + ".desktop")});
        QVERIFY2(desktop.exitCode == 0 && desktop.out.trimmed().isEmpty(), qPrintable(desktop.describe()));
        const auto metainfo = test::runProgram(
            appstream, {"validate", "--no-net", "--strict", installed("share/metainfo/" + kAppId + ".metainfo.xml")});
        QVERIFY2(metainfo.exitCode == 0, qPrintable(metainfo.describe()));
    }

    void tarballRunsFromItsOwnFolder() {
        QTemporaryDir home;
        QVERIFY2(QFileInfo::exists(tarball_ + "/share/tandem/models/" TANDEM_DEFAULT_MODEL_NAME "/config.json"),
                 qPrintable(tarball_));
        const auto run = test::runProgram(tarball_ + "/bin/tandem-cli", {"--version"}, isolatedEnvironment(home));
        QVERIFY2(run.exitCode == 0 && run.out.startsWith("tandem-cli " + kVersion), qPrintable(run.describe()));
    }
};

QTEST_MAIN(InstalledPackageTest)
#include "tst_installed_package.moc"
