#pragma once
// The engine-thread side of serving several requests at once: the generations admitted, their prompts
// prefilled a chunk at a time between decode steps, every prefilled one decoding in one step with the
// others (Generation::decodeTogether: on the CPU path each routed expert is read once for all the
// sequences that chose it), and the sessions kept between requests so that a client resending its
// conversation prefills only the new part. It has no thread of its own: its owner calls admit() and
// turn() on the thread that owns the engine (GenerationQueue's thread for tandem-cli serve; the desktop
// app's engine thread, between its chat's answers). Only its counters may be read from other threads.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "server/generation_queue.h"

namespace tandem::server {

class GenerationScheduler {
public:
    // conversations: sessions kept between jobs (more while more jobs run, one each); batch: the most
    // generations running at once (prefilling ones count); prefillChunk: the most prompt tokens prefilled
    // in a turn (0: whole prompts).
    GenerationScheduler(Engine& engine, const ModelText& text, int conversations, int batch, int prefillChunk);
    GenerationScheduler(const GenerationScheduler&) = delete;
    GenerationScheduler& operator=(const GenerationScheduler&) = delete;

    // Called with each job as it ends (finished, failed or dropped), just before its finish(): the
    // owner's bookkeeping, and the last chance to set the job's error.
    std::function<void(GenerationJob&)> onEnd;

    // The Expert Deferral of the sessions' generations from the next admitted job on (Session::setDeferral;
    // the desktop app's slider).
    void setDeferral(int experts) { deferral_ = experts; }
    // Whether another job may join (fewer than `batch` are prefilling or decoding).
    bool canAdmit() const { return active_.size() + prefilling_.size() < static_cast<std::size_t>(batch_); }
    // Gives a job its session and generation; it joins the prefilling ones (a cancelled one ends here).
    void admit(std::shared_ptr<GenerationJob> job);
    // Whether jobs are prefilling or decoding.
    bool busy() const { return !active_.empty() || !prefilling_.empty(); }
    // One turn: a chunk of the next prefilling job's prompt (round robin, so a short prompt admitted
    // behind a long one is not held up by all of it), then one decode step of the running ones. A long
    // prompt delays each of the others' tokens by one chunk's prefill at most.
    void turn();
    // Ends every job with what it has (their clients are told; for a shutdown, after cancelling them).
    void endAll();

    int batch() const { return batch_; }
    int prefillChunk() const { return prefillChunk_; }
    JobQueue::DecodeSteps decodeSteps() const;
    JobQueue::PrefillChunks prefillChunks() const;

private:
    // A job whose generation runs.
    struct Active {
        std::shared_ptr<GenerationJob> job;
        Session* session = nullptr;
        std::unique_ptr<Generation> generation;
        std::unique_ptr<TextStream> stream;
        int largestBatch = 1;  // the most sequences its decode steps ran with
    };

    void prefillNext();
    void step();
    // Samples a running job's next token and hands on its text: whether it goes on.
    bool advance(Active& a);
    // The generation ended (or was cut short): the job's usage, its end, its session free again.
    void end(Active& a);
    // The generation failed: the job's error; its session's cache may be half written, so it is dropped.
    void fail(Active& a, const std::string& error);
    void finish(GenerationJob& job);
    // The free kept conversation that shares the longest prefix with `prompt` (at least half of its cache),
    // else a new one while fewer than conversations_ are kept or all are busy, else the least recently used
    // free one. Marks it busy.
    Session& pickSession(const std::vector<int>& prompt);

    Engine& engine_;
    const ModelText& text_;
    int batch_;
    int prefillChunk_;   // 0: whole prompts
    int conversations_;
    struct Kept {
        std::unique_ptr<Session> session;
        std::uint64_t lastUsed = 0;
        bool busy = false;  // a running job's
    };
    std::vector<Kept> sessions_;
    std::vector<Active> active_;       // generations decoding
    std::deque<Active> prefilling_;    // generations whose prompt is being prefilled, next turn first
    std::uint64_t uses_ = 0;
    int deferral_ = -1;  // < 0: the sessions' own
    mutable std::mutex statsMutex_;
    JobQueue::DecodeSteps steps_;
    JobQueue::PrefillChunks prefills_;
};

}  // namespace tandem::server
