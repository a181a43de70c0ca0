#include "ui/text/byte_vocabulary.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

#include "tandem/error.h"

namespace tandem::ui {
namespace {

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68 byte values
// are shifted to code points 256.. in increasing order, so that every byte is a visible character.
std::array<char32_t, 256> byteLevelAlphabet() {
    std::array<char32_t, 256> alphabet{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        alphabet[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return alphabet;
}

Error vocabularyError(const QString& path, const QString& what) {
    return Error(QStringLiteral("%1: %2").arg(path, what).toStdString());
}

}  // namespace

ByteVocabulary ByteVocabulary::load(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw vocabularyError(path, QStringLiteral("cannot read the tokenizer (%1). The model folder needs the "
                                                   "tokenizer.json of its Hugging Face release.").arg(file.errorString()));
    QJsonParseError parseError;
    const QJsonObject root = QJsonDocument::fromJson(file.readAll(), &parseError).object();
    if (parseError.error != QJsonParseError::NoError)
        throw vocabularyError(path, QStringLiteral("not valid JSON (%1)").arg(parseError.errorString()));
    const QJsonObject vocab = root.value("model").toObject().value("vocab").toObject();
    if (vocab.isEmpty()) throw vocabularyError(path, QStringLiteral("has no model.vocab"));

    ByteVocabulary v;
    const auto grow = [&](int id) {
        if (id >= static_cast<int>(v.tokenBytes_.size())) v.tokenBytes_.resize(static_cast<std::size_t>(id) + 1);
    };
    // Byte-level vocabularies spell bytes with the alphabet above; SentencePiece-style ones (Mixtral)
    // have <0xNN> byte-fallback tokens and write spaces as U+2581.
    const bool byteFallback = vocab.contains(QStringLiteral("<0x00>"));
    QHash<char32_t, int> alphabetByte;
    const auto alphabet = byteLevelAlphabet();
    for (int b = 0; b < 256; ++b) alphabetByte.insert(alphabet[b], b);
    v.byteToken_.fill(-1);

    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        const int id = it.value().toInt(-1);
        if (id < 0) continue;
        grow(id);
        const QString& text = it.key();
        if (byteFallback) {
            if (text.size() == 6 && text.startsWith(QLatin1String("<0x")) && text.endsWith('>')) {
                bool ok = false;
                const int b = text.mid(3, 2).toInt(&ok, 16);
                if (ok) {
                    v.tokenBytes_[id] = QByteArray(1, static_cast<char>(b));
                    v.byteToken_[b] = id;
                    continue;
                }
            }
            v.tokenBytes_[id] = QString(text).replace(QChar(0x2581), QChar(' ')).toUtf8();
            continue;
        }
        QByteArray bytes;
        bool allBytes = true;
        for (const char32_t c : text.toUcs4()) {
            const auto found = alphabetByte.constFind(c);
            if (found == alphabetByte.cend()) {
                allBytes = false;
                break;
            }
            bytes.append(static_cast<char>(found.value()));
        }
        v.tokenBytes_[id] = allBytes ? bytes : text.toUtf8();
        if (allBytes && bytes.size() == 1) v.byteToken_[static_cast<unsigned char>(bytes[0])] = id;
    }
    for (const auto& entry : root.value("added_tokens").toArray()) {
        const QJsonObject token = entry.toObject();
        const int id = token.value("id").toInt(-1);
        const QString content = token.value("content").toString();
        if (id < 0 || content.isEmpty()) continue;
        grow(id);
        v.tokenBytes_[id] = content.toUtf8();
        v.addedTokens_.insert(content, id);
        v.addedIds_.insert(id, true);
        if (!v.addedTokenFirstChars_.contains(content[0])) v.addedTokenFirstChars_ += content[0];
    }
    const auto missing = std::find(v.byteToken_.begin(), v.byteToken_.end(), -1);
    if (missing != v.byteToken_.end())
        throw vocabularyError(path, QStringLiteral("has no token for byte 0x%1, which the stand-in tokenizer needs")
                                        .arg(static_cast<int>(missing - v.byteToken_.begin()), 2, 16, QChar('0')));
    return v;
}

void ByteVocabulary::encodeBytes(const QByteArray& utf8, std::vector<int>& out) const {
    for (const char c : utf8) out.push_back(byteToken_[static_cast<unsigned char>(c)]);
}

std::vector<int> ByteVocabulary::encode(const QString& text) const {
    std::vector<int> ids;
    qsizetype plainStart = 0;
    for (qsizetype i = 0; i < text.size(); ++i) {
        if (!addedTokenFirstChars_.contains(text[i])) continue;
        // Longest added token starting here.
        int bestId = -1;
        qsizetype bestLength = 0;
        for (auto it = addedTokens_.cbegin(); it != addedTokens_.cend(); ++it) {
            if (it.key().size() > bestLength && QStringView(text).mid(i).startsWith(it.key())) {
                bestId = it.value();
                bestLength = it.key().size();
            }
        }
        if (bestId < 0) continue;
        encodeBytes(text.mid(plainStart, i - plainStart).toUtf8(), ids);
        ids.push_back(bestId);
        i += bestLength - 1;
        plainStart = i + 1;
    }
    encodeBytes(text.mid(plainStart).toUtf8(), ids);
    return ids;
}

QByteArray ByteVocabulary::bytes(int id) const {
    return id >= 0 && id < size() ? tokenBytes_[static_cast<std::size_t>(id)] : QByteArray();
}

std::optional<int> ByteVocabulary::addedTokenId(const QString& content) const {
    const auto it = addedTokens_.constFind(content);
    return it == addedTokens_.cend() ? std::nullopt : std::optional<int>(it.value());
}

}  // namespace tandem::ui
