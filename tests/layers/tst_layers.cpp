// The folders' include arrows (docs/ARCHITECTURE.md, "Folders"): every source file of app/, ui/, hub/ and
// engine/ may include its own folder and the folders below it, never one above or beside it. A new
// upward include fails this test with the file, the line and the folders.
//
//   app -> ui/* , hub, engine's public API (tandem/), engine/bench
//   app/server (the OpenAI server, library tandem_server) -> the public API; ui/worker may use it
//   ui: shell -> widgets -> wizard -> controllers -> {models, settings} -> {store, monitor, worker} -> text;
//       chat below controllers; settings may use hub; all of ui the public API only
//   hub: nothing of ours
//   engine: bench -> runtime -> convert -> model -> {cpu, cuda} -> io -> core; text -> io; every engine
//       folder may use the public API's headers
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QFile>
#include <QRegularExpression>
#include <QTest>
#include <map>
#include <set>

namespace {

using Folders = std::set<QString>;

std::map<QString, Folders> allowedArrows() {
    std::map<QString, Folders> a;
    // ui, bottom up: each folder's own arrows plus everything below those.
    a["ui/chat"] = {};
    a["ui/monitor"] = {};
    a["ui/text"] = {"engine/include"};
    a["ui/store"] = {"engine/include"};
    a["app/server"] = {"engine/include"};
    a["ui/worker"] = {"ui/text", "app/server", "engine/include"};
    const auto below = [&](const QString& folder, Folders direct) {
        Folders all = direct;
        for (const QString& d : direct)
            if (a.count(d)) all.insert(a[d].begin(), a[d].end());
        a[folder] = all;
    };
    below("ui/settings", {"ui/worker", "hub"});
    below("ui/models", {"ui/store", "ui/monitor", "ui/worker"});
    below("ui/controllers", {"ui/models", "ui/settings", "ui/chat"});
    below("ui/wizard", {"ui/controllers"});
    below("ui/widgets", {"ui/wizard"});
    below("ui/shell", {"ui/widgets"});
    Folders app = {"hub", "engine/include", "engine/bench"};
    for (const auto& [folder, _] : a) app.insert(folder);
    a["app"] = app;
    a["hub"] = {};
    a["engine/core"] = {};
    a["engine/include"] = {};
    a["engine/io"] = {"engine/include", "engine/core"};
    a["engine/cpu"] = {"engine/include", "engine/core", "engine/io"};
    a["engine/cuda"] = {"engine/include", "engine/core", "engine/io"};
    a["engine/text"] = {"engine/include", "engine/core", "engine/io"};
    a["engine/model"] = {"engine/include", "engine/core", "engine/cpu", "engine/io"};
    a["engine/convert"] = {"engine/include", "engine/core", "engine/model", "engine/text", "engine/cpu", "engine/io"};
    a["engine/runtime"] = {"engine/include", "engine/core", "engine/convert", "engine/model", "engine/text",
                           "engine/cpu", "engine/cuda", "engine/io"};
    a["engine/bench"] = {"engine/include", "engine/core", "engine/runtime", "engine/model", "engine/cpu", "engine/io"};
    return a;
}

const QStringList kEngineFolders = {"bench", "runtime", "convert", "model", "text", "cpu", "cuda", "io", "core"};

// "engine/io" for engine/io/gguf.cpp, "ui/widgets" for ui/widgets/chat_view.cpp, "app" for app/x.cpp.
QString folderOfFile(const QString& relative) {
    const QStringList parts = relative.split('/');
    if ((parts[0] == "engine" || parts[0] == "ui") && parts.size() > 2) return parts[0] + "/" + parts[1];
    if (parts[0] == "app" && parts.size() > 2 && parts[1] == "server") return QStringLiteral("app/server");
    return parts[0];
}

// The folder an include path as written names, or empty (a file beside it, generated, a test helper).
QString folderOfInclude(const QString& path, const QString& including, const QString& root) {
    const QStringList parts = path.split('/');
    const QString top = including.section('/', 0, 0);
    if (parts[0] == "tandem") return "engine/include";
    if (kEngineFolders.contains(parts[0]) && (top == "engine" || QFileInfo(root + "/engine/" + parts[0]).isDir()))
        return "engine/" + parts[0];
    if (parts[0] == "ui" && parts.size() > 2) return "ui/" + parts[1];
    if (parts[0] == "hub") return "hub";
    if (parts[0] == "server" && parts.size() > 1 && (top == "app" || top == "ui")) return "app/server";
    return {};
}

}  // namespace

class LayersTest : public QObject {
    Q_OBJECT

private slots:
    void includesPointDownward() {
        const QString root = QStringLiteral(TANDEM_SOURCE_DIR);
        const auto allowed = allowedArrows();
        static const QRegularExpression include(QStringLiteral("^\\s*#\\s*include\\s*\"([^\"]+)\""));
        QStringList problems;
        int files = 0;
        for (const QString top : {"app", "ui", "hub", "engine"}) {
            QDirIterator it(root + "/" + top, {"*.h", "*.cpp", "*.cu", "*.cuh"}, QDir::Files, QDirIterator::Subdirectories);
            while (it.hasNext()) {
                const QString path = it.next();
                const QString relative = QDir(root).relativeFilePath(path);
                const QString own = folderOfFile(relative);
                const auto rule = allowed.find(own);
                if (rule == allowed.end()) continue;
                ++files;
                QFile file(path);
                QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(path));
                int number = 0;
                while (!file.atEnd()) {
                    const QString line = QString::fromUtf8(file.readLine());
                    ++number;
                    const auto m = include.match(line);
                    if (!m.hasMatch()) continue;
                    const QString target = folderOfInclude(m.captured(1), own, root);
                    if (!target.isEmpty() && target != own && !rule->second.count(target))
                        problems << QString("%1:%2: %3 includes %4 (%5), which is not below it")
                                        .arg(relative).arg(number).arg(own, m.captured(1), target);
                }
            }
        }
        QVERIFY2(files > 300, qPrintable(QString("only %1 source files found under %2").arg(files).arg(root)));
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
    }
};

QTEST_GUILESS_MAIN(LayersTest)
#include "tst_layers.moc"
