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
#include <memory>
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
    int completionTokens = 0;
    std::string error;         // the generation failed: why

private:
    friend class GenerationQueue;
    void deliver(std::vector<Delta>& deltas);
    void finish();

    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Delta> pending_;
    bool finished_ = false;
    std::atomic<bool> cancelled_{false};
};

class GenerationQueue {
public:
    GenerationQueue(Engine& engine, const ModelText& text);
    ~GenerationQueue();
    GenerationQueue(const GenerationQueue&) = delete;
    GenerationQueue& operator=(const GenerationQueue&) = delete;

    // False (and the job untouched) when `limit` jobs are already waiting or running.
    bool submit(std::shared_ptr<GenerationJob> job, int limit);
    int waiting() const;
    bool running() const;
    // Ends the engine thread: the running generation is cancelled, waiting jobs end with an error.
    void stop();

private:
    void run();
    void generate(Session& session, GenerationJob& job);
    int waitingLocked() const;

    Engine& engine_;
    const ModelText& text_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<GenerationJob>> waiting_;
    std::shared_ptr<GenerationJob> running_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tandem::server
