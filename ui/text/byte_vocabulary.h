#pragma once
// Stand-in tokenizer: reads a Hugging Face tokenizer.json and maps text to one token per byte (plus the
// added tokens such as <|im_start|>, matched exactly). Every BPE vocabulary holds a token for each byte,
// so the ids are valid for the model, just longer than the merged encoding the real tokenizer
// (engine/text) produces. Decoding is exact for any id.
#include <QByteArray>
#include <QHash>
#include <QString>
#include <array>
#include <optional>
#include <vector>

namespace tandem::ui {

class ByteVocabulary {
public:
    // Throws tandem::Error when the file is missing or has no token for some byte.
    static ByteVocabulary load(const QString& tokenizerJsonPath);

    std::vector<int> encode(const QString& text) const;
    // The bytes a token stands for; an added token's own text.
    QByteArray bytes(int id) const;
    std::optional<int> addedTokenId(const QString& content) const;
    bool isAddedToken(int id) const { return addedIds_.contains(id); }
    int size() const { return static_cast<int>(tokenBytes_.size()); }

private:
    void encodeBytes(const QByteArray& utf8, std::vector<int>& out) const;

    std::vector<QByteArray> tokenBytes_;   // by id
    std::array<int, 256> byteToken_{};     // the single-byte token of each byte value
    QHash<QString, int> addedTokens_;      // content -> id
    QHash<int, bool> addedIds_;
    QString addedTokenFirstChars_;         // to find added tokens without trying each at every position
};

}  // namespace tandem::ui
