#pragma once
// The server's one engine thread and the requests waiting for it, served first come, first served: the
// engine runs one generation at a time (batched decode of several sequences is for later), in one Session
// whose cached prefix a client resending its conversation reuses. An HTTP thread submits a job and then
// takes its text as it comes; cancelling a job (its client went away) ends its generation at the next
// token, or drops it before it starts.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/model_text.h"
#include "tandem/engine.h"

namespace tandem::server {

class GenerationJob {
public:
    // Set before the job is submitted.
    std::vector<int> prompt;
    GenerateOptions options;
    bool startsInReasoning = false;
    bool separateReasoning = true;  // chat: reasoning apart; completion: one text
    std::vector<std::string> stops;
    ToolCallFormat toolCalls = ToolCallFormat::None;  // a chat with tools: calls parsed out of the content
    std::string label;              // names the request in the server's log

    struct Update {
        std::vector<Delta> deltas;  // the text since the last take, in order
        bool finished = false;
    };
    // Waits up to `timeout` for text or the end and takes what there is.
    Update take(std::chrono::milliseconds timeout);

    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

    // Once take() reported the end:
    // "stop" (end of turn or a stop string), "length" (max_tokens) or "tool_calls" (it called tools)
    std::string finishReason;
    int promptTokens = 0;
    int cachedTokens = 0;      // of the prompt, found in a kept KV cache (not prefilled again)
    int completionTokens = 0;
    std::string error;         // the generation failed: why
    // How the error is answered: 500 generation_failed, or (a queue that lost its model) 503 and a code.
    int errorStatus = 500;
    std::string errorCode;

    // For the queue that runs the job: hands on text, and ends the job (once).
    void deliver(std::vector<Delta>& deltas);
    void finish();

private:

    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Delta> pending_;
    bool finished_ = false;
    std::atomic<bool> cancelled_{false};
};

// Where the server's jobs wait and run. GenerationQueue (tandem-cli serve) has an engine thread of its own;
// the desktop app runs them on the thread that owns its loaded model, in turn with its own chat.
class JobQueue {
public:
    virtual ~JobQueue() = default;
    // False (and the job untouched) when `limit` jobs are already waiting or running; may throw ApiError
    // (the model is going away).
    virtual bool submit(std::shared_ptr<GenerationJob> job, int limit) = 0;
    virtual int waiting() const = 0;
    virtual bool running() const = 0;
    // Ends the queue: the running generation is cancelled, waiting jobs end with an error.
    virtual void stop() = 0;
};

// What runs a job's prompt through a model: Session::generate, or the app's loaded model.
using GenerateFunction = std::function<GenerationStats(std::span<const int> prompt, const GenerateOptions& options,
                                                       const std::function<bool(int)>& onToken)>;
// Runs `job` through `generate`: its text as deltas, its usage and finish reason (not finish()). Throws
// what the generation throws.
void runGenerationJob(GenerationJob& job, const text::Tokenizer& tokenizer, const GenerateFunction& generate);

class GenerationQueue : public JobQueue {
public:
    // cachedConversations: ServerOptions' (0: 4 on the CPU path, 1 on the GPU).
    GenerationQueue(Engine& engine, const ModelText& text, int cachedConversations = 0);
    ~GenerationQueue() override;
    GenerationQueue(const GenerationQueue&) = delete;
    GenerationQueue& operator=(const GenerationQueue&) = delete;

    bool submit(std::shared_ptr<GenerationJob> job, int limit) override;
    int waiting() const override;
    bool running() const override;
    // Ends the engine thread: the running generation is cancelled, waiting jobs end with an error.
    void stop() override;

private:
    void run();
    void generate(Session& session, GenerationJob& job);
    // The kept conversation that shares the longest prefix with `prompt` (at least half of its cache), else a
    // new one while there is room, else the least recently used one.
    std::size_t pickSession(const std::vector<int>& prompt);
    int waitingLocked() const;

    Engine& engine_;
    const ModelText& text_;
    int conversations_;
    struct Kept {
        std::unique_ptr<Session> session;
        std::uint64_t lastUsed = 0;
    };
    std::vector<Kept> sessions_;  // the engine thread's only
    std::uint64_t uses_ = 0;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<GenerationJob>> waiting_;
    std::shared_ptr<GenerationJob> running_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tandem::server
