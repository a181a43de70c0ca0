#pragma once
// Watches streamed text for stop strings, across the boundaries of the pieces it arrives in: text that
// could be the start of a stop string is held back until it is clear, so a stop string never reaches
// the user, not even in part.
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class StopStringFilter {
public:
    explicit StopStringFilter(std::vector<std::string> stops);

    // The text that can be shown now. Once a stop string has appeared, stopped() is true and the text
    // before it was the last to be returned.
    std::string push(std::string_view text);
    // What was held back, at the end of the stream.
    std::string finish();
    bool stopped() const { return stopped_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool stopped_ = false;
};

}  // namespace tandem
