#pragma once
// Post-processors of a tokenizer.json: what encode(..., addSpecialTokens = true) wraps around the ids
// of a single text. Supported: TemplateProcessing (e.g. BOS in front), ByteLevel (offsets only, so the
// ids stay as they are), and Sequence.
#include <memory>
#include <string>
#include <vector>

#include "text/json_fields.h"

namespace tandem::text {

class PostProcessor {
public:
    virtual ~PostProcessor() = default;
    // Rewrites the ids of one encoded text in place.
    virtual void process(std::vector<int>& ids) const = 0;
};

// nullptr for a JSON null (no post-processor); throws tandem::Error naming `where` for an unknown type.
std::unique_ptr<PostProcessor> makePostProcessor(const Json& config, const std::string& where);

}  // namespace tandem::text
