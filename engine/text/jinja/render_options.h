#pragma once
#include <ctime>
#include <functional>

namespace tandem::text::jinja {

struct RenderOptions {
    // The local time strftime_now() formats; the system clock when empty. Tests fix it.
    std::function<std::tm()> now;
};

}  // namespace tandem::text::jinja
