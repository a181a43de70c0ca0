#include "text/json_fields.h"

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::text {
namespace {

const Json* optionalField(const Json& object, std::string_view name, const std::string& where) {
    if (!object.is_object()) throwMalformed(where, "expected a JSON object");
    const auto it = object.find(name);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string path(const std::string& where, std::string_view name) { return where + "." + std::string(name); }

}  // namespace

void throwMalformed(const std::string& where, const std::string& problem) { throw Error(where + ": " + problem); }

const Json& requiredField(const Json& object, std::string_view name, const std::string& where) {
    const Json* value = optionalField(object, name, where);
    if (!value) throwMalformed(path(where, name), "missing");
    return *value;
}

std::string stringField(const Json& object, std::string_view name, const std::string& where) {
    const Json& value = requiredField(object, name, where);
    if (!value.is_string()) throwMalformed(path(where, name), "expected a string");
    return value.get<std::string>();
}

std::string stringField(const Json& object, std::string_view name, const std::string& where,
                        const std::string& fallback) {
    const Json* value = optionalField(object, name, where);
    if (!value) return fallback;
    if (!value->is_string()) throwMalformed(path(where, name), "expected a string");
    return value->get<std::string>();
}

bool boolField(const Json& object, std::string_view name, const std::string& where, bool fallback) {
    const Json* value = optionalField(object, name, where);
    if (!value) return fallback;
    if (!value->is_boolean()) throwMalformed(path(where, name), "expected true or false");
    return value->get<bool>();
}

long long integerField(const Json& object, std::string_view name, const std::string& where) {
    const Json& value = requiredField(object, name, where);
    if (!value.is_number_integer()) throwMalformed(path(where, name), "expected a whole number");
    return value.get<long long>();
}

long long integerField(const Json& object, std::string_view name, const std::string& where, long long fallback) {
    return optionalField(object, name, where) ? integerField(object, name, where) : fallback;
}

std::string componentType(const Json& component, const std::string& where) {
    return stringField(component, "type", where);
}

}  // namespace tandem::text
