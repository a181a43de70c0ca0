#pragma once
// Running the packaging tools from the packaging suites.
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace tandem::test {

struct ProgramRun {
    bool finished = false;  // started and exited on its own (not crashed, not stuck)
    int exitCode = -1;
    QString out;
    QString err;
    QString describe() const;  // exit code and both outputs, for a failure message
};

// Runs PROGRAM to the end. The limit only keeps a stuck tool from hanging CTest.
ProgramRun runProgram(const QString& program, const QStringList& args,
                      const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment());

// The path of a tool on PATH, or empty with a test failure naming the Debian package to install.
QString requireTool(const QString& name, const QString& debianPackage);

}  // namespace tandem::test
