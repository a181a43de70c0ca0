#include "server/generation_scheduler.h"

#include <algorithm>
#include <cstdio>

namespace tandem::server {

GenerationScheduler::GenerationScheduler(Engine& engine, const ModelText& text, int conversations, int batch, int prefillChunk)
    : engine_(engine), text_(text), batch_(std::max(1, batch)), prefillChunk_(std::max(0, prefillChunk)),
      conversations_(std::max(1, conversations)) {}

JobQueue::DecodeSteps GenerationScheduler::decodeSteps() const {
    const std::lock_guard lock(statsMutex_);
    return steps_;
}

JobQueue::PrefillChunks GenerationScheduler::prefillChunks() const {
    const std::lock_guard lock(statsMutex_);
    return prefills_;
}

Session& GenerationScheduler::pickSession(const std::vector<int>& prompt) {
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

void GenerationScheduler::admit(std::shared_ptr<GenerationJob> job) {
    if (job->cancelled()) {
        std::fprintf(stderr, "%s: cancelled before it started (the client went away)\n", job->label.c_str());
        finish(*job);
        return;
    }
    Active a;
    a.job = std::move(job);
    try {
        a.session = &pickSession(a.job->prompt);
        if (deferral_ >= 0) a.session->setDeferral(deferral_);
        a.stream = std::make_unique<TextStream>(text_.tokenizer(), a.job->startsInReasoning, a.job->separateReasoning,
                                                a.job->stops, a.job->toolCalls);
        // Only the part after the session's cached prefix is left to prefill.
        a.generation = std::make_unique<Generation>(*a.session, a.job->prompt, a.job->options, Generation::Prefill::InChunks);
        prefilling_.push_back(std::move(a));
    } catch (const std::exception& e) {
        fail(a, e.what());
    }
}

void GenerationScheduler::turn() {
    if (!prefilling_.empty()) prefillNext();
    if (!active_.empty()) step();
}

void GenerationScheduler::endAll() {
    for (Active& a : prefilling_) end(a);
    prefilling_.clear();
    for (Active& a : active_) end(a);
    active_.clear();
}

void GenerationScheduler::prefillNext() {
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
            const std::lock_guard lock(statsMutex_);
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

void GenerationScheduler::step() {
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
        const std::lock_guard lock(statsMutex_);
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

bool GenerationScheduler::advance(Active& a) {
    const auto token = a.generation->next();
    if (!token) return false;
    std::vector<Delta> out;
    a.stream->push(*token, out);
    a.job->deliver(out);
    return !a.job->cancelled() && !a.stream->stopped() && !a.generation->full();
}

void GenerationScheduler::end(Active& a) {
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
    finish(*a.job);
}

void GenerationScheduler::fail(Active& a, const std::string& error) {
    a.job->error = error;
    std::fprintf(stderr, "%s: failed: %s\n", a.job->label.c_str(), error.c_str());
    std::erase_if(sessions_, [&](const Kept& k) { return k.session.get() == a.session; });
    finish(*a.job);
}

void GenerationScheduler::finish(GenerationJob& job) {
    if (onEnd) onEnd(job);
    job.finish();
}

}  // namespace tandem::server
