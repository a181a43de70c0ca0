#include "packaging_support.h"

#include <QProcess>
#include <QStandardPaths>
#include <QTest>

namespace tandem::test {

QString ProgramRun::describe() const {
    return QStringLiteral("exit %1\n--- stdout\n%2\n--- stderr\n%3").arg(exitCode).arg(out, err);
}

ProgramRun runProgram(const QString& program, const QStringList& args, const QProcessEnvironment& env) {
    QProcess process;
    process.setProcessEnvironment(env);
    process.start(program, args);
    ProgramRun run;
    run.finished = process.waitForFinished(300000) && process.exitStatus() == QProcess::NormalExit;
    run.exitCode = process.exitCode();
    run.out = QString::fromUtf8(process.readAllStandardOutput());
    run.err = QString::fromUtf8(process.readAllStandardError());
    if (!run.finished) run.err += QStringLiteral("\n(%1 did not finish: %2)").arg(program, process.errorString());
    return run;
}

QString requireTool(const QString& name, const QString& debianPackage) {
    const QString path = QStandardPaths::findExecutable(name);
    if (path.isEmpty())
        QTest::qFail(qPrintable(QStringLiteral("%1 is not installed: install the Debian package %2 "
                                               "(scripts/install-deps.sh does)")
                                    .arg(name, debianPackage)),
                     __FILE__, __LINE__);
    return path;
}

}  // namespace tandem::test
