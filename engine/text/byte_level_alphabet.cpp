#include "text/byte_level_alphabet.h"

#include <array>
#include <cstdint>

#include "text/utf8.h"

namespace tandem::text::byte_level {
namespace {

struct Alphabet {
    // byte -> its character, as UTF-8 (one or two bytes)
    std::array<std::array<char, 2>, 256> encoded{};
    std::array<std::uint8_t, 256> encodedLength{};
    // code point -> byte + 1 (0: not in the alphabet); every character of the alphabet is below U+0144
    std::array<std::uint16_t, 0x144> byteOf{};

    Alphabet() {
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t c = printable ? static_cast<char32_t>(b) : next++;
            std::string s;
            utf8::append(s, c);
            encodedLength[b] = static_cast<std::uint8_t>(s.size());
            for (std::size_t k = 0; k < s.size(); ++k) encoded[b][k] = s[k];
            byteOf[c] = static_cast<std::uint16_t>(b + 1);
        }
    }
};

const Alphabet& alphabet() {
    static const Alphabet a;
    return a;
}

}  // namespace

void appendMapped(std::string& out, std::string_view bytes) {
    const Alphabet& a = alphabet();
    for (const char ch : bytes) {
        const auto b = static_cast<unsigned char>(ch);
        out.append(a.encoded[b].data(), a.encodedLength[b]);
    }
}

bool appendUnmapped(std::string& out, std::string_view token) {
    const Alphabet& a = alphabet();
    const std::size_t mark = out.size();
    std::size_t pos = 0;
    while (pos < token.size()) {
        const char32_t c = utf8::decode(token, pos);
        if (c >= a.byteOf.size() || a.byteOf[c] == 0) {
            out.resize(mark);
            return false;
        }
        out += static_cast<char>(a.byteOf[c] - 1);
    }
    return true;
}

}  // namespace tandem::text::byte_level
