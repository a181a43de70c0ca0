#include "ui/text/utf8_stream.h"

namespace tandem::ui {
namespace {

// Length of the complete prefix: drops a trailing lead byte whose continuation bytes have not arrived.
qsizetype completeLength(const QByteArray& bytes) {
    const qsizetype n = bytes.size();
    for (qsizetype back = 1; back <= 4 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(bytes[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
        const int needed = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return needed > back ? n - back : n;
    }
    return n;
}

}  // namespace

QString Utf8Stream::push(const QByteArray& bytes) {
    pending_ += bytes;
    const qsizetype complete = completeLength(pending_);
    const QString text = QString::fromUtf8(pending_.constData(), complete);
    pending_.remove(0, complete);
    return text;
}

QString Utf8Stream::finish() {
    // What is held back is at most the start of one character: one replacement character.
    const QString text = pending_.isEmpty() ? QString() : QString(QChar::ReplacementCharacter);
    pending_.clear();
    return text;
}

}  // namespace tandem::ui
