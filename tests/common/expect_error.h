#pragma once
// Runs `action`, which must throw tandem::Error with a message containing every one of `parts`.
#include <QString>
#include <QTest>
#include <initializer_list>
#include <string>

#include "tandem/error.h"

namespace tandem::test {

template <class F>
void expectError(F&& action, std::initializer_list<const char*> parts) {
    try {
        action();
    } catch (const tandem::Error& e) {
        const std::string message = e.what();
        for (const char* part : parts)
            QVERIFY2(message.find(part) != std::string::npos, qPrintable(QString("'%1' lacks '%2'").arg(e.what(), part)));
        return;
    }
    QFAIL("no tandem::Error was thrown");
}

}  // namespace tandem::test
