#include "server/generation_queue.h"

#include "server/generation_scheduler.h"

#include <algorithm>
#include <cstdio>

namespace tandem::server {

GenerationJob::Update GenerationJob::take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return finished_ || !pending_.empty(); });
    Update update;
    update.deltas.swap(pending_);
    update.finished = finished_;
    return update;
}

void GenerationJob::deliver(std::vector<Delta>& deltas) {
    if (deltas.empty()) return;
    {
        const std::lock_guard lock(mutex_);
        for (auto& d : deltas) {
            if (!pending_.empty() && pending_.back().kind == d.kind)
                pending_.back().text += d.text;
            else
                pending_.push_back(std::move(d));
        }
    }
    deltas.clear();
    changed_.notify_all();
}

void GenerationJob::finish() {
    {
        const std::lock_guard lock(mutex_);
        finished_ = true;
    }
    changed_.notify_all();
}

GenerationQueue::GenerationQueue(Engine& engine, const ModelText& text, int cachedConversations, int batch,
                                 int prefillChunk) {
    const bool cpu = engine.info().device == "CPU";
    const int b = batch > 0 ? batch : cpu ? 4 : 1;
    scheduler_ = std::make_unique<GenerationScheduler>(engine, text, cachedConversations > 0 ? cachedConversations : cpu ? 4 : 1, b,
                                                       prefillChunk >= 0 ? prefillChunk : defaultPrefillChunk(b));
    scheduler_->onEnd = [this](GenerationJob& job) {
        const std::lock_guard lock(mutex_);
        std::erase_if(running_, [&](const std::shared_ptr<GenerationJob>& j) { return j.get() == &job; });
    };
    thread_ = std::thread([this] { run(); });
}

int GenerationQueue::batch() const { return scheduler_->batch(); }
int GenerationQueue::prefillChunk() const { return scheduler_->prefillChunk(); }

GenerationQueue::~GenerationQueue() {
    stop();
    thread_.join();
}

bool GenerationQueue::submit(std::shared_ptr<GenerationJob> job, int limit) {
    {
        const std::lock_guard lock(mutex_);
        if (stopping_ || waitingLocked() + static_cast<int>(running_.size()) >= limit) return false;
        waiting_.push_back(std::move(job));
    }
    wake_.notify_one();
    return true;
}

int GenerationQueue::waiting() const {
    const std::lock_guard lock(mutex_);
    return waitingLocked();
}

// Cancelled jobs stay in line until the engine thread reaches them, but nobody waits for them any more.
int GenerationQueue::waitingLocked() const {
    return static_cast<int>(std::count_if(waiting_.begin(), waiting_.end(), [](const auto& job) { return !job->cancelled(); }));
}

bool GenerationQueue::running() const {
    const std::lock_guard lock(mutex_);
    return !running_.empty();
}

int GenerationQueue::runningCount() const {
    const std::lock_guard lock(mutex_);
    return static_cast<int>(running_.size());
}

JobQueue::DecodeSteps GenerationQueue::decodeSteps() const { return scheduler_->decodeSteps(); }

JobQueue::PrefillChunks GenerationQueue::prefillChunks() const { return scheduler_->prefillChunks(); }

void GenerationQueue::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
        for (const auto& job : running_) job->cancel();
    }
    wake_.notify_all();
}

void GenerationQueue::run() {
    // Each turn of the loop admits at most one new job, then the scheduler's turn: at most one chunk of
    // one admitted job's prompt, then one decode step of all the running ones (generation_scheduler.h).
    while (true) {
        std::shared_ptr<GenerationJob> job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || scheduler_->busy(); });
            if (stopping_) break;
            // A prefilling job counts: it decodes with the others once prefilled.
            if (!waiting_.empty() && scheduler_->canAdmit()) {
                job = std::move(waiting_.front());
                waiting_.pop_front();
                running_.push_back(job);
            }
        }
        if (job) scheduler_->admit(std::move(job));
        scheduler_->turn();
    }
    // stop() cancelled the running jobs: they end with what they have.
    scheduler_->endAll();
    const std::lock_guard lock(mutex_);
    for (auto& job : waiting_) {
        job->error = "the server is shutting down";
        job->finish();
    }
    waiting_.clear();
}

void runGenerationJob(GenerationJob& job, const text::Tokenizer& tokenizer, const GenerateFunction& generateFn) {
    TextStream stream(tokenizer, job.startsInReasoning, job.separateReasoning, job.stops, job.toolCalls);
    std::vector<Delta> out;
    const auto stats = generateFn(job.prompt, job.options, [&](int token) {
        stream.push(token, out);
        job.deliver(out);
        return !job.cancelled() && !stream.stopped();
    });
    settleGenerationJob(job, stream, stats);
}

void settleGenerationJob(GenerationJob& job, TextStream& stream, const GenerationStats& stats, int batch) {
    std::vector<Delta> out;
    stream.finish(out);
    job.deliver(out);
    job.promptTokens = stats.promptTokens;
    job.cachedTokens = stats.reusedTokens;
    job.completionTokens = stats.generatedTokens;
    const bool length = !stats.stoppedAtEos && !stream.stopped() && stats.generatedTokens >= job.options.maxNewTokens;
    job.finishReason = length ? "length" : stream.sawToolCalls() ? "tool_calls" : "stop";
    const std::string together = batch > 1 ? ", decoded with up to " + std::to_string(batch) + " sequences together" : "";
    std::fprintf(stderr, "%s: %d prompt tokens (%d reused), %d generated at %.1f tok/s%s, %s\n", job.label.c_str(),
                 stats.promptTokens, stats.reusedTokens, stats.generatedTokens, stats.decodeTokensPerSecond(),
                 together.c_str(),
                 job.cancelled() ? "cancelled (the client went away)" : length ? "stopped at max_tokens" : "done");
}

}  // namespace tandem::server
