#include "text/decoder.h"

#include <nlohmann/json.hpp>

#include "text/byte_level_alphabet.h"
#include "text/pattern.h"
#include "text/utf8.h"

namespace tandem::text {
namespace {

// Maps every token back to bytes and joins them into one string; invalid UTF-8 (a character whose
// bytes are not all there) becomes U+FFFD. A token outside the alphabet keeps its own bytes.
class ByteLevelDecoder final : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override {
        std::string bytes;
        for (const std::string& token : tokens)
            if (!byte_level::appendUnmapped(bytes, token)) bytes += token;
        tokens.assign(1, utf8::toValidLossy(bytes));
    }
};

// The replacement character turns back into a space, except in the first token, where it stands for
// the space the pre-tokenizer put in front and is dropped.
class MetaspaceDecoder final : public Decoder {
public:
    MetaspaceDecoder(std::string replacement, bool dropInFirstToken)
        : replacement_(std::move(replacement)), dropInFirstToken_(dropInFirstToken) {}

    void decodeChain(std::vector<std::string>& tokens) const override {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const bool drop = i == 0 && dropInFirstToken_;
            std::string out;
            std::string_view rest = tokens[i];
            for (std::size_t at; (at = rest.find(replacement_)) != std::string_view::npos;) {
                out += rest.substr(0, at);
                if (!drop) out += ' ';
                rest.remove_prefix(at + replacement_.size());
            }
            out += rest;
            tokens[i] = std::move(out);
        }
    }

private:
    std::string replacement_;
    bool dropInFirstToken_;
};

// Runs of "<0xNN>" tokens become the bytes they name; a run that is not valid UTF-8 becomes one
// U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string run;
        std::size_t runLength = 0;
        const auto flush = [&] {
            if (runLength == 0) return;
            if (utf8::firstInvalidOffset(run) == utf8::kValid) {
                out.push_back(run);
            } else {
                for (std::size_t k = 0; k < runLength; ++k) out.emplace_back(utf8::kReplacementCharacter);
            }
            run.clear();
            runLength = 0;
        };
        for (std::string& token : tokens) {
            if (const auto byte = byteOf(token)) {
                run += static_cast<char>(*byte);
                ++runLength;
            } else {
                flush();
                out.push_back(std::move(token));
            }
        }
        flush();
        tokens = std::move(out);
    }

private:
    static std::optional<unsigned char> byteOf(const std::string& token) {
        if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
        const auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            return -1;
        };
        const int high = hex(token[3]), low = hex(token[4]);
        if (high < 0 || low < 0) return std::nullopt;
        return static_cast<unsigned char>(high * 16 + low);
    }
};

class FuseDecoder final : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override {
        std::string joined;
        for (const std::string& token : tokens) joined += token;
        tokens.assign(1, std::move(joined));
    }
};

// Removes up to `start` leading and `stop` trailing copies of one character from every token.
class StripDecoder final : public Decoder {
public:
    StripDecoder(std::string content, std::size_t start, std::size_t stop)
        : content_(std::move(content)), start_(start), stop_(stop) {}

    void decodeChain(std::vector<std::string>& tokens) const override {
        for (std::string& token : tokens) {
            std::string_view view = token;
            for (std::size_t k = 0; k < start_ && view.starts_with(content_); ++k) view.remove_prefix(content_.size());
            for (std::size_t k = 0; k < stop_ && view.ends_with(content_); ++k) view.remove_suffix(content_.size());
            token = std::string(view);
        }
    }

private:
    std::string content_;
    std::size_t start_;
    std::size_t stop_;
};

class ReplaceDecoder final : public Decoder {
public:
    ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void decodeChain(std::vector<std::string>& tokens) const override {
        for (std::string& token : tokens) token = pattern_.replaceAll(token, content_);
    }

private:
    Pattern pattern_;
    std::string content_;
};

class SequenceDecoder final : public Decoder {
public:
    explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
    void decodeChain(std::vector<std::string>& tokens) const override {
        for (const auto& step : steps_) step->decodeChain(tokens);
    }

private:
    std::vector<std::unique_ptr<Decoder>> steps_;
};

bool metaspaceDropsFirst(const Json& config, const std::string& where) {
    if (!config.contains("prepend_scheme") || config["prepend_scheme"].is_null())
        return boolField(config, "add_prefix_space", where, true);
    const std::string scheme = stringField(config, "prepend_scheme", where);
    if (scheme != "always" && scheme != "first" && scheme != "never")
        throwMalformed(where + ".prepend_scheme", "'" + scheme + "' is unknown (expected always, first or never)");
    return scheme != "never";
}

std::size_t countField(const Json& config, const char* name, const std::string& where) {
    const long long n = integerField(config, name, where, 0);
    if (n < 0) throwMalformed(where + "." + name, "must not be negative");
    return static_cast<std::size_t>(n);
}

}  // namespace

std::unique_ptr<Decoder> makeDecoder(const Json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = componentType(config, where);
    if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
    if (type == "Metaspace")
        return std::make_unique<MetaspaceDecoder>(stringField(config, "replacement", where, "\u2581"),
                                                  metaspaceDropsFirst(config, where));
    if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
    if (type == "Fuse") return std::make_unique<FuseDecoder>();
    if (type == "Strip")
        return std::make_unique<StripDecoder>(stringField(config, "content", where), countField(config, "start", where),
                                              countField(config, "stop", where));
    if (type == "Replace")
        return std::make_unique<ReplaceDecoder>(Pattern::fromJson(requiredField(config, "pattern", where), where + ".pattern"),
                                                stringField(config, "content", where));
    if (type == "Sequence") {
        const Json& list = requiredField(config, "decoders", where);
        if (!list.is_array()) throwMalformed(where + ".decoders", "expected a list");
        std::vector<std::unique_ptr<Decoder>> steps;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto step = makeDecoder(list[i], where + ".decoders[" + std::to_string(i) + "]");
            if (step) steps.push_back(std::move(step));
        }
        return std::make_unique<SequenceDecoder>(std::move(steps));
    }
    throwMalformed(where, "decoder type '" + type +
                              "' is not supported (supported: ByteLevel, ByteFallback, Fuse, Metaspace, Replace, Strip, "
                              "Sequence)");
}

}  // namespace tandem::text
