#pragma once
// The server's jobs and the queues they wait in. Up to `batch` generations run together
// (GenerationScheduler, generation_scheduler.h): a new one is admitted (one a turn, first come first
// served) and its prompt prefilled a chunk at a time between decode steps, so that a long prompt does not
// stall the others' streams; once prefilled, every running generation takes its next token in one decode
// step. Each runs in a kept Session whose cached prefix a client resending its conversation reuses. An
// HTTP thread submits a job and then takes its text as it comes; cancelling a job (its client went away)
// ends its generation at its next token or chunk of prompt, or drops it before it starts.
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
    // Generations running now.
    virtual int runningCount() const { return running() ? 1 : 0; }
    // Decode steps run so far: all, those that decoded several sequences together, and the most in one.
    struct DecodeSteps {
        long steps = 0;
        long batched = 0;
        int largest = 0;
    };
    virtual DecodeSteps decodeSteps() const { return {}; }
    // Prompt prefills run so far: forward passes of a prompt or a chunk of one, and their tokens (the
    // cached prefixes reused are not counted).
    struct PrefillChunks {
        long chunks = 0;
        long tokens = 0;
    };
    virtual PrefillChunks prefillChunks() const { return {}; }
    // Ends the queue: the running generation is cancelled, waiting jobs end with an error.
    virtual void stop() = 0;
};

// What runs a job's prompt through a model: Session::generate, or the app's loaded model.
using GenerateFunction = std::function<GenerationStats(std::span<const int> prompt, const GenerateOptions& options,
                                                       const std::function<bool(int)>& onToken)>;
// Runs `job` through `generate`: its text as deltas, its usage and finish reason (not finish()). Throws
// what the generation throws.
void runGenerationJob(GenerationJob& job, const text::Tokenizer& tokenizer, const GenerateFunction& generate);
// The end of a job's generation: what `stream` held back, its usage and finish reason, and its line in the
// log (`batch`: the most sequences its decode steps ran together, said when more than one).
void settleGenerationJob(GenerationJob& job, TextStream& stream, const GenerationStats& stats, int batch = 1);

class GenerationScheduler;

// tandem-cli serve's queue: an engine thread of its own runs a GenerationScheduler (generation_scheduler.h).
class GenerationQueue : public JobQueue {
public:
    // cachedConversations and batch: ServerOptions' (0: 4 on the CPU path, 1 on the GPU). prefillChunk:
    // the most prompt tokens prefilled between two decode steps; 0 the whole prompt at once; < 0 the
    // default (defaultPrefillChunk).
    GenerationQueue(Engine& engine, const ModelText& text, int cachedConversations = 0, int batch = 0,
                    int prefillChunk = -1);
    ~GenerationQueue() override;
    GenerationQueue(const GenerationQueue&) = delete;
    GenerationQueue& operator=(const GenerationQueue&) = delete;

    bool submit(std::shared_ptr<GenerationJob> job, int limit) override;
    int waiting() const override;
    bool running() const override;
    int runningCount() const override;
    DecodeSteps decodeSteps() const override;
    PrefillChunks prefillChunks() const override;
    // Ends the engine thread: the running generations are cancelled, waiting jobs end with an error.
    void stop() override;

    int batch() const;
    int prefillChunk() const;
    // 512 tokens where generations decode together (`batch` > 1): the running ones wait at most one chunk's
    // prefill for each token, and a chunk is still long enough that each routed expert it reads serves many
    // of its tokens. With one generation at a time there is nobody to interleave with, and the whole prompt
    // at once is the fastest (the GPU path streams a long prompt's CPU-held experts through the GPU).
    static int defaultPrefillChunk(int batch) { return batch > 1 ? 512 : 0; }

private:
    void run();
    int waitingLocked() const;

    std::unique_ptr<GenerationScheduler> scheduler_;  // the engine thread's, but for its counters
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<GenerationJob>> waiting_;
    std::vector<std::shared_ptr<GenerationJob>> running_;  // the jobs the scheduler has
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tandem::server
