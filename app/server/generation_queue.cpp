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

GenerationQueue::GenerationQueue(Engine& engine, const ModelText& text, int cachedConversations, int batch,
                                 int prefillChunk)
    : engine_(engine), text_(text), batch_(batch > 0 ? batch : engine.info().device == "CPU" ? 4 : 1),
      prefillChunk_(prefillChunk >= 0 ? prefillChunk : defaultPrefillChunk(batch_)),
      conversations_(cachedConversations > 0 ? cachedConversations : engine.info().device == "CPU" ? 4 : 1),
      thread_([this] { run(); }) {}

Session& GenerationQueue::pickSession(const std::vector<int>& prompt) {
    std::size_t best = sessions_.size(), longest = 0;
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
        if (sessions_[i].busy) continue;
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
    // Else the least recently used free one once `conversations_` are kept; a new one while there are fewer,
    // or while all are busy (the generations that run together each need one).
    if (best == sessions_.size() && sessions_.size() >= static_cast<std::size_t>(conversations_))
        for (std::size_t i = 0; i < sessions_.size(); ++i)
            if (!sessions_[i].busy && (best == sessions_.size() || sessions_[i].lastUsed < sessions_[best].lastUsed)) best = i;
    if (best == sessions_.size()) sessions_.push_back({engine_.newSession(), 0, false});
    sessions_[best].lastUsed = ++uses_;
    sessions_[best].busy = true;
    return *sessions_[best].session;
}

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

JobQueue::DecodeSteps GenerationQueue::decodeSteps() const {
    const std::lock_guard lock(mutex_);
    return steps_;
}

JobQueue::PrefillChunks GenerationQueue::prefillChunks() const {
    const std::lock_guard lock(mutex_);
    return prefills_;
}

void GenerationQueue::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
        for (const auto& job : running_) job->cancel();
    }
    wake_.notify_all();
}

void GenerationQueue::run() {
    // Kept conversations (pickSession): a Generation keeps the cached prefix a new prompt shares with the
    // session's context, so a client that resends its growing conversation prefills only the new part,
    // also when other clients' requests came in between. Each turn of the loop admits at most one new
    // job, prefills at most one chunk of one admitted job's prompt, then runs one decode step of all the
    // running ones: a long prompt delays each of the others' tokens by one chunk's prefill at most, and a
    // short prompt admitted behind it is prefilled in its turn, not after all of it.
    while (true) {
        std::shared_ptr<GenerationJob> job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !active_.empty() || !prefilling_.empty(); });
            if (stopping_) break;
            // A prefilling job counts: it decodes with the others once prefilled.
            if (!waiting_.empty() && active_.size() + prefilling_.size() < static_cast<std::size_t>(batch_)) {
                job = std::move(waiting_.front());
                waiting_.pop_front();
                running_.push_back(job);
            }
        }
        if (job) admit(std::move(job));
        if (!prefilling_.empty()) prefillNext();
        if (!active_.empty()) step();
    }
    // stop() cancelled the running jobs: they end with what they have.
    for (Active& a : prefilling_) end(a);
    prefilling_.clear();
    for (Active& a : active_) end(a);
    active_.clear();
    const std::lock_guard lock(mutex_);
    for (auto& job : waiting_) {
        job->error = "the server is shutting down";
        job->finish();
    }
    waiting_.clear();
}

void GenerationQueue::admit(std::shared_ptr<GenerationJob> job) {
    if (job->cancelled()) {
        std::fprintf(stderr, "%s: cancelled before it started (the client went away)\n", job->label.c_str());
        job->finish();
        release(job);
        return;
    }
    Active a;
    a.job = std::move(job);
    try {
        a.session = &pickSession(a.job->prompt);
        a.stream = std::make_unique<TextStream>(text_.tokenizer(), a.job->startsInReasoning, a.job->separateReasoning,
                                                a.job->stops, a.job->toolCalls);
        // Only the part after the session's cached prefix is left to prefill.
        a.generation = std::make_unique<Generation>(*a.session, a.job->prompt, a.job->options, Generation::Prefill::InChunks);
        prefilling_.push_back(std::move(a));
    } catch (const std::exception& e) {
        fail(a, e.what());
    }
}

void GenerationQueue::prefillNext() {
    // A client that went away stops its prefill here, at a chunk's end: its session keeps the prompt's
    // tokens run so far (a retry continues from them) and is free again.
    for (auto it = prefilling_.begin(); it != prefilling_.end();) {
        if (!it->job->cancelled()) {
            ++it;
            continue;
        }
        end(*it);
        it = prefilling_.erase(it);
    }
    if (prefilling_.empty()) return;
    Active a = std::move(prefilling_.front());
    prefilling_.pop_front();
    try {
        const int before = a.generation->prefillLeft();
        const bool done = a.generation->prefill(prefillChunk_);
        {
            const std::lock_guard lock(mutex_);
            ++prefills_.chunks;
            prefills_.tokens += before - a.generation->prefillLeft();
        }
        if (!done) {
            prefilling_.push_back(std::move(a));  // the others' turn first
            return;
        }
        // Prefilled: its first token, and it decodes with the others from this turn's step on.
        if (advance(a))
            active_.push_back(std::move(a));
        else
            end(a);
    } catch (const std::exception& e) {
        fail(a, e.what());
    }
}

void GenerationQueue::step() {
    std::vector<Generation*> generations;
    for (const Active& a : active_) generations.push_back(a.generation.get());
    std::vector<bool> failed(active_.size(), false);
    try {
        Generation::decodeTogether(generations);
    } catch (const std::exception&) {
        // Nothing ran (decodeTogether is all or nothing): each alone, so that one that cannot go on (its
        // context is full) fails without the others.
        for (std::size_t i = 0; i < active_.size(); ++i) {
            try {
                Generation::decodeTogether(std::span<Generation* const>(&generations[i], 1));
            } catch (const std::exception& e) {
                fail(active_[i], e.what());
                failed[i] = true;
            }
        }
    }
    const int together = static_cast<int>(std::count(failed.begin(), failed.end(), false));
    {
        const std::lock_guard lock(mutex_);
        ++steps_.steps;
        if (together > 1) ++steps_.batched;
        steps_.largest = std::max(steps_.largest, together);
    }
    std::vector<Active> next;
    for (std::size_t i = 0; i < active_.size(); ++i) {
        if (failed[i]) continue;
        Active& a = active_[i];
        a.largestBatch = std::max(a.largestBatch, together);
        try {
            if (advance(a)) {
                next.push_back(std::move(a));
                continue;
            }
            end(a);
        } catch (const std::exception& e) {
            fail(a, e.what());
        }
    }
    active_ = std::move(next);
}

bool GenerationQueue::advance(Active& a) {
    const auto token = a.generation->next();
    if (!token) return false;
    std::vector<Delta> out;
    a.stream->push(*token, out);
    a.job->deliver(out);
    return !a.job->cancelled() && !a.stream->stopped() && !a.generation->full();
}

void GenerationQueue::end(Active& a) {
    settleGenerationJob(*a.job, *a.stream, a.generation->finish(), a.largestBatch);
    for (Kept& k : sessions_)
        if (k.session.get() == a.session) k.busy = false;
    // Sessions made while all were busy go again once free: `conversations_` caches are kept.
    while (sessions_.size() > static_cast<std::size_t>(conversations_)) {
        auto oldest = sessions_.end();
        for (auto k = sessions_.begin(); k != sessions_.end(); ++k)
            if (!k->busy && (oldest == sessions_.end() || k->lastUsed < oldest->lastUsed)) oldest = k;
        if (oldest == sessions_.end()) break;
        sessions_.erase(oldest);
    }
    a.job->finish();
    release(a.job);
}

void GenerationQueue::fail(Active& a, const std::string& error) {
    a.job->error = error;
    std::fprintf(stderr, "%s: failed: %s\n", a.job->label.c_str(), error.c_str());
    std::erase_if(sessions_, [&](const Kept& k) { return k.session.get() == a.session; });
    a.job->finish();
    release(a.job);
}

void GenerationQueue::release(const std::shared_ptr<GenerationJob>& job) {
    const std::lock_guard lock(mutex_);
    std::erase(running_, job);
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
