#pragma once
// Between template values and JSON: the inputs a chat template receives, and Hugging Face's tojson
// filter, which is Python's json.dumps (ensure_ascii=False by default, so text stays as written).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace tandem::text::jinja {

// JSON objects keep their key order, as Python dicts do.
Value fromJson(const nlohmann::ordered_json& json);

struct JsonOptions {
    bool ensureAscii = false;
    std::optional<std::string> indent;  // json.dumps' indent, as the string of one level
    std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
    bool sortKeys = false;
};

// Throws TemplateError for values JSON cannot hold, with Python's message.
std::string toJson(const Value& value, const JsonOptions& options);

}  // namespace tandem::text::jinja
