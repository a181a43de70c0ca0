#pragma once
// Chatting with a model: its own chat template and tokenizer around a Session. A conversation is
// given whole each turn (so editing an earlier message or regenerating just works); the session keeps
// the part of its cache the new prompt shares and prefills only the rest. reply() is the one turn loop:
// tandem-cli and the app (through its own generator) both answer through it.
//
//   tandem::Chat chat(*engine, modelDir);
//   auto session = engine->newSession();
//   auto reply = chat.reply(*session, {{"user", "Hello"}}, {}, [](tandem::TextKind, std::string_view t) {
//       std::cout << t;
//       return true;
//   });
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/engine.h"

namespace tandem {

struct ChatMessage {
    std::string role;       // "system", "user", "assistant"
    std::string content;
    std::string reasoning;  // an assistant's thinking, passed to templates as reasoning_content
};

struct ChatOptions {
    GenerateOptions generate;
    std::vector<std::string> stopStrings;  // the answer ends before the first of these
    bool enableThinking = true;            // for templates that can switch reasoning off (Qwen3)
    // For templates that read reasoning_effort (gpt-oss: "low", "medium", "high"); empty: the template's
    // own default.
    std::string reasoningEffort;
};

enum class TextKind { Answer, Reasoning };

struct ChatReply {
    std::string answer;
    std::string reasoning;
    GenerationStats stats;
    bool stoppedByStopString = false;
};

// JSON text and what to call it in errors ("standard input", "--var tools").
struct JsonInput {
    std::string text;
    std::string name;
};

struct RenderedPrompt {
    std::string text;
    std::string warning;  // the model has no chat template: a known format of its family was used
};

// The prompt a model folder's chat template makes of `messages` (a JSON array of {"role", "content", ...}),
// with extra template variables (`variables`: name and JSON value, e.g. enable_thinking and false).
// Throws tandem::Error naming the input that is not JSON or nests too deep, or the template's error.
RenderedPrompt renderChatPrompt(const std::filesystem::path& modelDir, const JsonInput& messages,
                                const std::vector<std::pair<std::string, JsonInput>>& variables, bool addGenerationPrompt);

class Chat {
public:
    // Reads the tokenizer and chat template of a model folder; `modelType` (config.json's model_type)
    // picks the standard format when the folder has no template. Throws tandem::Error for a missing or
    // broken tokenizer.json or template.
    Chat(const std::filesystem::path& modelDir, const std::string& modelType);
    // The same for the folder `engine` was loaded from.
    Chat(const Engine& engine, const std::filesystem::path& modelDir) : Chat(modelDir, engine.info().modelType) {}
    ~Chat();
    Chat(Chat&&) noexcept;

    // Set when the folder has no chat template and a standard format of the architecture is used.
    const std::string& templateWarning() const;

    // Once *cancel is true (set from any thread), a template render in progress (a prompt being made)
    // ends with an Error soon after; a hostile template's render is otherwise bounded by its limits.
    void setCancelFlag(const std::atomic<bool>* cancel);

    // The prompt tokens of a conversation, as reply() would run them.
    std::vector<int> promptTokens(const std::vector<ChatMessage>& conversation, bool enableThinking) const;

    // Runs the model for one answer: like Session::generate, which is what the Session overload of
    // reply() passes. The app passes its own, which does the engine thread's work around each token.
    using Generator = std::function<GenerationStats(std::span<const int> prompt, const GenerateOptions& options,
                                                    const std::function<bool(int)>& onToken)>;

    // One chat turn: answers the conversation's last (user) message, streaming text as it is generated.
    // The generator gets the conversation's prompt and options in which the template's end-of-turn token
    // stops the answer and ids past the tokenizer's vocabulary are never chosen; its onToken returns false
    // once the answer is over (a stop string, or onText returning false to stop).
    ChatReply reply(const Generator& generate, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                    const std::function<bool(TextKind, std::string_view)>& onText) const;
    // The same in `session`.
    ChatReply reply(Session& session, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                    const std::function<bool(TextKind, std::string_view)>& onText) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
