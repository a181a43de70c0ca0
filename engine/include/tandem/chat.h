#pragma once
// Chatting with a model: its own chat template and tokenizer around a Session. A conversation is
// given whole each turn (so editing an earlier message or regenerating just works); the session keeps
// the part of its cache the new prompt shares and prefills only the rest.
//
//   tandem::Chat chat(*engine, modelDir);
//   auto session = engine->newSession();
//   auto reply = chat.reply(*session, {{"user", "Hello"}}, {}, [](tandem::TextKind, std::string_view t) {
//       std::cout << t;
//       return true;
//   });
#include <filesystem>
#include <functional>
#include <memory>
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
};

enum class TextKind { Answer, Reasoning };

struct ChatReply {
    std::string answer;
    std::string reasoning;
    GenerationStats stats;
    bool stoppedByStopString = false;
};

// The text of one answer as its tokens arrive: whole characters only, special tokens hidden, the
// model's reasoning apart from its answer.
class AnswerStream {
public:
    struct Piece {
        TextKind kind;
        std::string text;
    };
    ~AnswerStream();
    AnswerStream(AnswerStream&&) noexcept;
    std::vector<Piece> push(int token);
    // What was held back, when the answer ends.
    std::vector<Piece> finish();

private:
    friend class Chat;
    struct Impl;
    explicit AnswerStream(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

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

    // The prompt tokens of a conversation, as reply() would run them.
    std::vector<int> promptTokens(const std::vector<ChatMessage>& conversation, bool enableThinking) const;
    // Generation options for a chat answer: the template's end-of-turn token stops it, and ids past the
    // tokenizer's vocabulary are never chosen.
    GenerateOptions answerOptions(GenerateOptions options) const;
    // A stream for the answer to the conversation's prompt (which may already open the reasoning).
    AnswerStream answerStream(const std::vector<ChatMessage>& conversation, bool enableThinking) const;

    // The building blocks above put together: answers the conversation's last (user) message in
    // `session`, streaming text as it is generated; onText returns false to stop.
    ChatReply reply(Session& session, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                    const std::function<bool(TextKind, std::string_view)>& onText) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
