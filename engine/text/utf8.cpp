#include "text/utf8.h"

namespace tandem::text::utf8 {
namespace {

struct Scan {
    bool valid;
    std::size_t length;  // valid: the character's; invalid: the maximal subpart's (at least 1)
};

// The well-formed byte sequences of Unicode's table 3-7: the allowed range of the second byte depends
// on the lead byte (this excludes overlong forms, surrogates and code points past U+10FFFF). A sequence
// cut short by the end of the text is invalid too.
Scan scanAt(std::string_view s, std::size_t i) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) return {true, 1};
    std::size_t need;
    unsigned char secondLow = 0x80, secondHigh = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3;
        if (lead == 0xE0) secondLow = 0xA0;
        if (lead == 0xED) secondHigh = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4;
        if (lead == 0xF0) secondLow = 0x90;
        if (lead == 0xF4) secondHigh = 0x8F;
    } else {
        return {false, 1};
    }
    for (std::size_t k = 1; k < need; ++k) {
        if (i + k >= s.size()) return {false, k};
        const auto b = static_cast<unsigned char>(s[i + k]);
        const unsigned char low = k == 1 ? secondLow : 0x80;
        const unsigned char high = k == 1 ? secondHigh : 0xBF;
        if (b < low || b > high) return {false, k};
    }
    return {true, need};
}

}  // namespace

std::size_t firstInvalidOffset(std::string_view bytes) {
    std::size_t i = 0;
    while (i < bytes.size()) {
        if (static_cast<unsigned char>(bytes[i]) < 0x80) {
            ++i;
            continue;
        }
        const Scan scan = scanAt(bytes, i);
        if (!scan.valid) return i;
        i += scan.length;
    }
    return kValid;
}

char32_t decode(std::string_view text, std::size_t& pos) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    const std::size_t length = sequenceLength(lead);
    char32_t cp = length == 1 ? lead : length == 2 ? lead & 0x1F : length == 3 ? lead & 0x0F : lead & 0x07;
    for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
    pos += length;
    return cp;
}

void append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string toValidLossy(std::string_view bytes) {
    if (firstInvalidOffset(bytes) == kValid) return std::string(bytes);
    std::string out;
    out.reserve(bytes.size() + 8);
    std::size_t i = 0;
    while (i < bytes.size()) {
        const Scan scan = scanAt(bytes, i);
        if (scan.valid) {
            out.append(bytes.substr(i, scan.length));
        } else {
            out.append(kReplacementCharacter);
        }
        i += scan.length;
    }
    return out;
}

}  // namespace tandem::text::utf8
