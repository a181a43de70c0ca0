#include "server/generation_queue.h"

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

GenerationQueue::GenerationQueue(Engine& engine, const ModelText& text, int cachedConversations)
    : engine_(engine), text_(text),
      conversations_(cachedConversations > 0 ? cachedConversations : engine.info().device == "CPU" ? 4 : 1),
      thread_([this] { run(); }) {}

std::size_t GenerationQueue::pickSession(const std::vector<int>& prompt) {
    std::size_t best = sessions_.size(), longest = 0;
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
        const auto& context = sessions_[i].session->context();
        const auto shared = static_cast<std::size_t>(
            std::mismatch(context.begin(), context.end(), prompt.begin(), prompt.end()).first - context.begin());
        // A conversation continues where the prompt keeps at least half of its cache (a chat template's
        // shared opening alone does not make another client's conversation this one).
        if (shared > longest && 2 * shared >= context.size()) {
            best = i;
            longest = shared;
        }
    }
    if (best == sessions_.size()) {
        if (sessions_.size() < static_cast<std::size_t>(conversations_)) {
            sessions_.push_back({engine_.newSession(), 0});
        } else {
            best = 0;
            for (std::size_t i = 1; i < sessions_.size(); ++i)
                if (sessions_[i].lastUsed < sessions_[best].lastUsed) best = i;
        }
    }
    if (best == sessions_.size()) best = sessions_.size() - 1;
    sessions_[best].lastUsed = ++uses_;
    return best;
}

GenerationQueue::~GenerationQueue() {
    stop();
    thread_.join();
}

bool GenerationQueue::submit(std::shared_ptr<GenerationJob> job, int limit) {
    {
        const std::lock_guard lock(mutex_);
        if (stopping_ || waitingLocked() + (running_ ? 1 : 0) >= limit) return false;
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
    return running_ != nullptr;
}

void GenerationQueue::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
        if (running_) running_->cancel();
    }
    wake_.notify_all();
}

void GenerationQueue::run() {
    // Kept conversations (pickSession): Session::generate keeps the cached prefix a new prompt shares with
    // the session's context, so a client that resends its growing conversation prefills only the new part,
    // also when other clients' requests came in between.
    while (true) {
        std::shared_ptr<GenerationJob> job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
            if (stopping_) break;
            job = std::move(waiting_.front());
            waiting_.pop_front();
            running_ = job;
        }
        if (!job->cancelled()) {
            std::size_t chosen = sessions_.size();
            try {
                chosen = pickSession(job->prompt);
                generate(*sessions_[chosen].session, *job);
            } catch (const std::exception& e) {
                job->error = e.what();
                std::fprintf(stderr, "%s: failed: %s\n", job->label.c_str(), e.what());
                // Its cache may be half written: that conversation starts again.
                if (chosen < sessions_.size()) sessions_.erase(sessions_.begin() + static_cast<std::ptrdiff_t>(chosen));
            }
        } else {
            std::fprintf(stderr, "%s: cancelled before it started (the client went away)\n", job->label.c_str());
        }
        job->finish();
        const std::lock_guard lock(mutex_);
        running_.reset();
    }
    const std::lock_guard lock(mutex_);
    for (auto& job : waiting_) {
        job->error = "the server is shutting down";
        job->finish();
    }
    waiting_.clear();
}

void GenerationQueue::generate(Session& session, GenerationJob& job) {
    runGenerationJob(job, text_.tokenizer(), [&](std::span<const int> prompt, const GenerateOptions& options,
                                                 const std::function<bool(int)>& onToken) {
        return session.generate(prompt, options, onToken);
    });
}

void runGenerationJob(GenerationJob& job, const text::Tokenizer& tokenizer, const GenerateFunction& generateFn) {
    TextStream stream(tokenizer, job.startsInReasoning, job.separateReasoning, job.stops, job.toolCalls);
    std::vector<Delta> out;
    const auto stats = generateFn(job.prompt, job.options, [&](int token) {
        stream.push(token, out);
        job.deliver(out);
        return !job.cancelled() && !stream.stopped();
    });
    stream.finish(out);
    job.deliver(out);
    job.promptTokens = stats.promptTokens;
    job.cachedTokens = stats.reusedTokens;
    job.completionTokens = stats.generatedTokens;
    const bool length = !stats.stoppedAtEos && !stream.stopped() && stats.generatedTokens >= job.options.maxNewTokens;
    job.finishReason = length ? "length" : stream.sawToolCalls() ? "tool_calls" : "stop";
    std::fprintf(stderr, "%s: %d prompt tokens (%d reused), %d generated at %.1f tok/s, %s\n", job.label.c_str(),
                 stats.promptTokens, stats.reusedTokens, stats.generatedTokens, stats.decodeTokensPerSecond(),
                 job.cancelled() ? "cancelled (the client went away)" : length ? "stopped at max_tokens" : "done");
}

}  // namespace tandem::server
