#pragma once
// An error answered in the shape of OpenAI's API: an HTTP status and the body
// {"error": {"message", "type", "param", "code"}}, which the official clients turn into their exceptions.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::server {

class ApiError : public std::runtime_error {
public:
    // `param` names the request field at fault ("messages[1].content"), `code` is a short machine-readable
    // reason ("model_not_found"); either may be empty.
    ApiError(int status, const std::string& message, std::string param = {}, std::string code = {})
        : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}

    int status() const { return status_; }
    const std::string& param() const { return param_; }
    const std::string& code() const { return code_; }

private:
    int status_;
    std::string param_;
    std::string code_;
};

// OpenAI's error types: "invalid_request_error" below 500 (a wrong key included, as OpenAI does),
// "server_error" from 500 on.
inline nlohmann::ordered_json errorBody(int status, const std::string& message, const std::string& param = {},
                                        const std::string& code = {}) {
    using Json = nlohmann::ordered_json;
    return Json{{"error",
                 {{"message", message},
                  {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                  {"param", param.empty() ? Json() : Json(param)},
                  {"code", code.empty() ? Json() : Json(code)}}}};
}

inline nlohmann::ordered_json errorBody(const ApiError& e) { return errorBody(e.status(), e.what(), e.param(), e.code()); }

}  // namespace tandem::server
