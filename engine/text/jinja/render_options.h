#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>

namespace tandem::text::jinja {

// What one render may use. Chat templates come from the internet: one that loops, recurses or grows a
// string without end is stopped with an error naming the limit it reached. The defaults sit far above
// what the real templates in tests/text/data use on a long conversation with tools (tst_jinja_limits
// measures them; docs/ARCHITECTURE.md has the figures) and far below what would stall the app.
struct RenderLimits {
    // Template nodes evaluated, plus the work of builtins: one step per item they go through and per
    // 64 bytes of text they read.
    std::uint64_t steps = 20'000'000;
    // The longest string (the output included) and the longest list a template may build.
    std::size_t stringBytes = std::size_t(64) << 20;
    std::size_t listItems = std::size_t(1) << 20;
    // All the strings and lists one render builds, added up: this bounds its memory and its copying.
    std::uint64_t builtBytes = std::uint64_t(256) << 20;
    // Macro calls and loop() recursion in progress at once (jinja2 stops near here on Python's
    // recursion limit).
    int callDepth = 200;
    // Lists, dicts and namespaces inside one another that printing, tojson and comparisons follow.
    int valueDepth = 500;
};

// What a render used, for figures and tests.
struct RenderUsage {
    std::uint64_t steps = 0;
    std::uint64_t builtBytes = 0;
    std::size_t longestString = 0;  // the output or the longest string built, in bytes
    int deepestCall = 0;
    int deepestValue = 0;
};

struct RenderOptions {
    // The local time strftime_now() formats; the system clock when empty. Tests fix it.
    std::function<std::tm()> now;
    RenderLimits limits;
    // When set, the render ends with an error soon after *cancel becomes true (it is polled with the
    // step count, every few thousand steps), from whichever thread sets it.
    const std::atomic<bool>* cancel = nullptr;
    // When set, receives what the render used, also when it fails.
    RenderUsage* usage = nullptr;
};

}  // namespace tandem::text::jinja
