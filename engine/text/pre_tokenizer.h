#pragma once
// Pre-tokenizers of a tokenizer.json: they cut a stretch of normalized text into the words that BPE
// encodes one at a time. Supported: Sequence, Split, ByteLevel, Metaspace and Digits.
//
// Words flow through a callback instead of being collected in vectors, so a chain of pre-tokenizers
// costs no allocation per word: each stage hands the views it cuts to the next stage.
#include <memory>
#include <string>
#include <string_view>

#include "text/function_ref.h"
#include "text/json_fields.h"

namespace tandem::text {

struct Piece {
    std::string_view text;
    // The piece begins where the input text began (what Metaspace's prepend_scheme "first" asks).
    bool atStart = false;
};

using PieceSink = FunctionRef<void(const Piece&)>;

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    // Cuts `piece` (valid UTF-8) and passes each non-empty part, in order, to `emit`. The views are
    // valid only during the call to `emit`.
    virtual void split(const Piece& piece, PieceSink emit) const = 0;
};

// nullptr for a JSON null (no pre-tokenizer); throws tandem::Error naming `where` for an unknown type.
std::unique_ptr<PreTokenizer> makePreTokenizer(const Json& config, const std::string& where);

}  // namespace tandem::text
