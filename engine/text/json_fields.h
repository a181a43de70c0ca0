#pragma once
// Checked access to the fields of a tokenizer.json: a missing field or a value of the wrong type becomes
// a tandem::Error that names where in the file it is ("pre_tokenizer.pretokenizers[1].pattern").
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace tandem::text {

using Json = nlohmann::json;

const Json& requiredField(const Json& object, std::string_view name, const std::string& where);
std::string stringField(const Json& object, std::string_view name, const std::string& where);
// A missing field or a JSON null gives `fallback`.
std::string stringField(const Json& object, std::string_view name, const std::string& where,
                        const std::string& fallback);
bool boolField(const Json& object, std::string_view name, const std::string& where, bool fallback);
long long integerField(const Json& object, std::string_view name, const std::string& where);
long long integerField(const Json& object, std::string_view name, const std::string& where, long long fallback);

// The "type" of a component; `where` names the component.
std::string componentType(const Json& component, const std::string& where);

// The largest token id a tokenizer.json may use: 16 M, 64 times the largest vocabulary released (~256 K).
// A larger id is damage, and would make the id table gigabytes (or overflow `int` at 2^31 - 1).
inline constexpr long long kMaxTokenId = (1LL << 24) - 1;

[[noreturn]] void throwMalformed(const std::string& where, const std::string& problem);

}  // namespace tandem::text
