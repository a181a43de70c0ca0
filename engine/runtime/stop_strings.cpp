#include "runtime/stop_strings.h"

#include <algorithm>

namespace tandem {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringFilter::push(std::string_view text) {
    if (stopped_) return {};
    pending_ += text;
    std::size_t first = std::string::npos;
    for (const auto& stop : stops_) first = std::min(first, pending_.find(stop));
    if (first != std::string::npos) {
        std::string out = pending_.substr(0, first);
        pending_.clear();
        stopped_ = true;
        return out;
    }
    // Hold back the longest tail that a stop string starts with.
    std::size_t hold = 0;
    for (const auto& stop : stops_)
        for (std::size_t n = std::min(stop.size() - 1, pending_.size()); n > hold; --n)
            if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
                hold = n;
                break;
            }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopStringFilter::finish() {
    std::string out;
    std::swap(out, pending_);
    return stopped_ ? std::string() : out;
}

}  // namespace tandem
