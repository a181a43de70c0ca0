#pragma once
// The bodies of POST /v1/chat/completions and /v1/completions, checked field by field: a field of the
// wrong type or out of range is an ApiError (400) naming it. Fields Tandem does not know are ignored,
// as clients send vendor extensions; those it knows but cannot honour (n > 1, logprobs, image content,
// JSON response formats) are refused rather than silently dropped.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/engine.h"

namespace tandem::server {

// Sampling fields a request set; the rest keep the model's defaults (generation_config.json).
struct SamplingFields {
    std::optional<double> temperature, topP, minP, presencePenalty, frequencyPenalty, repetitionPenalty;
    std::optional<int> topK;
    std::optional<std::int64_t> seed;

    // The model's defaults with these fields over them. Without a seed, sampling is seeded at random.
    SamplingOptions apply(SamplingOptions defaults) const;
};

struct CommonRequest {
    std::string model;
    bool stream = false;
    bool includeUsage = false;      // stream_options.include_usage: a last chunk with the usage
    std::optional<int> maxTokens;   // max_tokens or max_completion_tokens
    SamplingFields sampling;
    std::vector<std::string> stop;  // empty strings dropped
};

struct ChatRequest : CommonRequest {
    nlohmann::ordered_json messages;  // as the chat template takes them (content always a string)
    nlohmann::ordered_json tools;     // null when none (or tool_choice "none")
    // Template variables: chat_template_kwargs (e.g. enable_thinking) and reasoning_effort.
    nlohmann::ordered_json templateVariables = nlohmann::ordered_json::object();
};

struct CompletionRequest : CommonRequest {
    std::string prompt;           // the prompt as text, or
    std::vector<int> promptIds;   // as token ids (then prompt is empty)
};

// `maxTokensLimit` is the most max_tokens a request may ask for (serve --max-tokens).
ChatRequest parseChatRequest(std::string_view body, int maxTokensLimit);
CompletionRequest parseCompletionRequest(std::string_view body, int maxTokensLimit);

}  // namespace tandem::server
