#pragma once
// Normalizers of a tokenizer.json: they rewrite each stretch of input text between added tokens before
// it is split into words. Supported: NFC, NFD, NFKC, NFKD, Sequence, Prepend and Replace.
#include <memory>
#include <string>

#include "text/json_fields.h"

namespace tandem::text {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    // Rewrites valid UTF-8 `text` in place.
    virtual void normalize(std::string& text) const = 0;
};

// nullptr for a JSON null (no normalizer); throws tandem::Error naming `where` for an unknown type.
std::unique_ptr<Normalizer> makeNormalizer(const Json& config, const std::string& where);

}  // namespace tandem::text
