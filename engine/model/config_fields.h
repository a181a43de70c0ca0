#pragma once
// Reading config.json: typed access to its fields with errors that name the file and the field, and the
// attention blocks' fields that several families share (model/families).
#include <nlohmann/json.hpp>

#include <string>
#include <type_traits>

#include "model/config.h"
#include "tandem/error.h"

namespace tandem::model {

// Typed access to one JSON object with errors that name the file and the field.
// A field that is present but null counts as absent, as in transformers.
class ConfigFields {
public:
    ConfigFields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

    bool has(const char* key) const {
        const auto it = j_.find(key);
        return it != j_.end() && !it->is_null();
    }

    template <class T>
    T get(const char* key) const {
        if (!has(key)) throw Error(where_ + ": missing '" + key + "'");
        return as<T>(key);
    }

    template <class T>
    T get(const char* key, T fallback) const {
        return has(key) ? as<T>(key) : fallback;
    }

    const nlohmann::json& raw(const char* key) const { return j_.at(key); }
    const nlohmann::json& json() const { return j_; }  // the whole object
    const std::string& where() const { return where_; }

private:
    template <class T>
    T as(const char* key) const {
        const nlohmann::json& v = j_.at(key);
        try {
            if constexpr (std::is_same_v<T, bool>) {
                if (!v.is_boolean()) throw Error("");
            } else if constexpr (std::is_integral_v<T>) {
                if (!v.is_number_integer()) throw Error("");
            } else if constexpr (std::is_floating_point_v<T>) {
                if (!v.is_number()) throw Error("");
            } else if constexpr (std::is_same_v<T, std::string>) {
                if (!v.is_string()) throw Error("");
            }
            return v.get<T>();
        } catch (const std::exception&) {
            throw Error(where_ + ": '" + key + "' has the wrong type (" + v.dump() + ")");
        }
    }

    const nlohmann::json& j_;
    std::string where_;
};

// Throws tandem::Error naming the field unless value > 0.
void requirePositive(const ConfigFields& f, const char* key, int value);

// Grouped-query attention (num_key_value_heads, head_dim).
void readGqaAttention(const ConfigFields& f, ModelConfig& c);
// DeepSeek's multi-head latent attention (q_lora_rank, kv_lora_rank, the head widths).
void readMlaAttention(const ConfigFields& f, ModelConfig& c);
// DeepSeek's mixture of experts (model/families/deepseek.cpp): routed and shared experts, the first
// first_k_dense_replace layers dense; v3 routes as DeepSeek-V3 does (sigmoid, correction bias, noaux_tc),
// as GLM-4.5 does too.
void readDeepseekMoe(const ConfigFields& f, ModelConfig& c, bool v3);
bool deepseekMoeLayer(const ModelConfig& c, int layer);

}  // namespace tandem::model
