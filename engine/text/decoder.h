#pragma once
// Decoders of a tokenizer.json: they turn the token strings of a decode back into text. Supported:
// ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and Sequence. Like Hugging Face tokenizers,
// each works on the list of token strings, and decode() joins what is left.
#include <memory>
#include <string>
#include <vector>

#include "text/json_fields.h"

namespace tandem::text {

class Decoder {
public:
    virtual ~Decoder() = default;
    // Rewrites the token strings in place; a decoder may merge them into fewer strings.
    virtual void decodeChain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a JSON null (no decoder); throws tandem::Error naming `where` for an unknown type.
std::unique_ptr<Decoder> makeDecoder(const Json& config, const std::string& where);

}  // namespace tandem::text
