#pragma once
// Bytes in, text out, for tokens that may end in the middle of a UTF-8 character: the incomplete tail
// is held back until the next bytes complete it.
#include <QByteArray>
#include <QString>

namespace tandem::ui {

class Utf8Stream {
public:
    QString push(const QByteArray& bytes);
    // What is still held back, with U+FFFD for an incomplete character.
    QString finish();

private:
    QByteArray pending_;
};

}  // namespace tandem::ui
