#pragma once
// The limits of render_options.h as the interpreter and the value operations enforce them. The value
// operations are Python's semantics and never see the interpreter, so the budget of the render in
// progress belongs to the thread, as Python keeps its recursion depth in the thread state. Outside a
// render (converting the input variables, say) nothing is counted or limited.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "text/jinja/error.h"
#include "text/jinja/render_options.h"

namespace tandem::text::jinja {

class RenderBudget {
public:
    RenderBudget(const RenderLimits& limits, const std::atomic<bool>* cancel) : limits_(limits), cancel_(cancel) {
        nextCheck_ = std::min(kPollInterval, stepCeiling());
    }
    RenderBudget(const RenderBudget&) = delete;
    RenderBudget& operator=(const RenderBudget&) = delete;

    // The budget of the render in progress on this thread; nullptr between renders.
    static RenderBudget* current() { return current_; }

    const RenderLimits& limits() const { return limits_; }
    const RenderUsage& usage() const { return usage_; }

    // Counts `n` steps. Past the step limit, or once the caller cancelled, the render ends.
    void step(std::uint64_t n = 1) {
        usage_.steps += n;
        if (usage_.steps >= nextCheck_) [[unlikely]] checkpoint();
    }

    // A string or list of `bytes` was built.
    void built(std::uint64_t bytes) {
        usage_.builtBytes += bytes;
        if (usage_.builtBytes > limits_.builtBytes) [[unlikely]]
            throw TemplateError("the template built more than " + describeBytes(limits_.builtBytes) +
                                " of strings and lists in one render; rendering stopped");
    }

    // Throws unless a string of `bytes` may be built; `what` ("a string", "its output") names it.
    void checkString(std::size_t bytes, const char* what = "a string") {
        if (bytes > limits_.stringBytes) [[unlikely]]
            throw TemplateError("the template tried to make " + std::string(what) + " longer than " +
                                describeBytes(limits_.stringBytes) + "; rendering stopped");
        usage_.longestString = std::max(usage_.longestString, bytes);
    }

    void checkList(std::size_t items) {
        if (items > limits_.listItems) [[unlikely]]
            throw TemplateError("the template tried to make a list of more than " + std::to_string(limits_.listItems) +
                                " items; rendering stopped");
    }

    // A macro call or loop() recursion starts (`who` names it in the error) or ends.
    void enterCall(const std::string& who) {
        if (callDepth_ >= limits_.callDepth) [[unlikely]]
            throw TemplateError(who + " recursed more than " + std::to_string(limits_.callDepth) + " levels deep");
        usage_.deepestCall = std::max(usage_.deepestCall, ++callDepth_);
    }
    void leaveCall() { --callDepth_; }

private:
    friend class ActiveRenderBudget;
    friend class NestingGuard;

    // How often, in steps, the cancel flag is read: a few thousand steps take well under a millisecond.
    static constexpr std::uint64_t kPollInterval = 4096;

    std::uint64_t stepCeiling() const {
        return limits_.steps == std::numeric_limits<std::uint64_t>::max() ? limits_.steps : limits_.steps + 1;
    }

    [[gnu::cold]] void checkpoint() {
        if (cancel_ && cancel_->load(std::memory_order_relaxed)) throw TemplateError("rendering was cancelled");
        if (usage_.steps > limits_.steps)
            throw TemplateError("the template ran more than " + std::to_string(limits_.steps) +
                                " steps (a loop or recursion that does not end?); rendering stopped");
        const std::uint64_t ceiling = stepCeiling();
        nextCheck_ = ceiling - usage_.steps > kPollInterval ? usage_.steps + kPollInterval : ceiling;
    }

    static std::string describeBytes(std::uint64_t n) {
        if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + " MiB";
        return std::to_string(n) + " bytes";
    }

    static inline thread_local RenderBudget* current_ = nullptr;

    RenderLimits limits_;
    const std::atomic<bool>* cancel_;
    RenderUsage usage_;
    std::uint64_t nextCheck_ = 0;
    int callDepth_ = 0;
};

// Makes `budget` the current one on this thread while it lives.
class ActiveRenderBudget {
public:
    explicit ActiveRenderBudget(RenderBudget& budget) : previous_(RenderBudget::current_) { RenderBudget::current_ = &budget; }
    ~ActiveRenderBudget() { RenderBudget::current_ = previous_; }
    ActiveRenderBudget(const ActiveRenderBudget&) = delete;
    ActiveRenderBudget& operator=(const ActiveRenderBudget&) = delete;

private:
    RenderBudget* previous_;
};

// What the value operations (python_ops, filters, methods) charge to the render in progress.
namespace budget {

inline void chargeSteps(std::uint64_t n) {
    if (RenderBudget* b = RenderBudget::current()) b->step(n);
}
// Reading `bytes` of text costs a step per 64 bytes.
inline void chargeText(std::size_t bytes) {
    if (bytes >= 64) chargeSteps(bytes / 64);
}
// `a == b` for text, counting the bytes compared when they are many.
inline bool sameText(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    chargeText(a.size());
    return a == b;
}
// A string of `bytes` is about to be built (or has been): it must fit the limit, and it counts.
inline void checkString(std::size_t bytes, const char* what = "a string") {
    if (RenderBudget* b = RenderBudget::current()) b->checkString(bytes, what);
}
inline void builtString(std::size_t bytes) {
    if (RenderBudget* b = RenderBudget::current()) {
        b->checkString(bytes);
        b->built(bytes);
    }
}
inline void checkList(std::size_t items) {
    if (RenderBudget* b = RenderBudget::current()) b->checkList(items);
}
inline void builtList(std::size_t items, std::size_t bytesPerItem) {
    if (RenderBudget* b = RenderBudget::current()) {
        b->checkList(items);
        b->built(static_cast<std::uint64_t>(items) * bytesPerItem);
    }
}

}  // namespace budget

// One level of a value inside another that printing, tojson or a comparison follows. Beyond the
// depth limit it throws; `action` ("printed", "compared", ...) says what was being done.
class NestingGuard {
public:
    explicit NestingGuard(const char* action) {
        RenderBudget* b = RenderBudget::current();
        const int limit = b ? b->limits_.valueDepth : RenderLimits{}.valueDepth;
        if (depth_ >= limit) [[unlikely]]
            throw TemplateError("a value nested more than " + std::to_string(limit) +
                                " levels deep (lists, dicts or namespaces inside one another) cannot be " + action);
        if (b) {
            b->step();
            b->usage_.deepestValue = std::max(b->usage_.deepestValue, depth_ + 1);
        }
        ++depth_;
    }
    ~NestingGuard() { --depth_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

private:
    static inline thread_local int depth_ = 0;
};

}  // namespace tandem::text::jinja
