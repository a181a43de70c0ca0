#include "text/split_pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "text/pattern.h"

namespace tandem::text {
namespace {

struct Segment {
    std::size_t start;
    std::size_t end;
    bool isMatch;
};

// Applies a behavior to the segments of one piece as they arrive, holding back at most one segment
// (the one that a following segment may still be glued to).
class SegmentJoiner {
public:
    SegmentJoiner(const Piece& piece, SplitBehavior behavior, PieceSink emit)
        : piece_(piece), behavior_(behavior), emit_(emit) {}

    void add(const Segment& segment) {
        switch (behavior_) {
        case SplitBehavior::Removed:
            if (!segment.isMatch) send(segment);
            break;
        case SplitBehavior::Isolated:
            send(segment);
            break;
        case SplitBehavior::Contiguous:
            if (hasPending_ && pending_.isMatch == segment.isMatch) {
                pending_.end = segment.end;
            } else {
                hold(segment);
            }
            break;
        case SplitBehavior::MergedWithPrevious:
            if (segment.isMatch && !previousWasMatch_ && hasPending_) {
                pending_.end = segment.end;
            } else {
                hold(segment);
            }
            break;
        case SplitBehavior::MergedWithNext:
            // A match is held until we know whether a non-match follows that it joins.
            if (segment.isMatch) {
                hold(segment);
            } else if (hasPending_) {
                pending_.end = segment.end;
                flush();
            } else {
                send(segment);
            }
            break;
        }
        previousWasMatch_ = segment.isMatch;
    }

    void flush() {
        if (hasPending_) send(pending_);
        hasPending_ = false;
    }

private:
    void hold(const Segment& segment) {
        flush();
        pending_ = segment;
        hasPending_ = true;
    }

    void send(const Segment& segment) const {
        if (segment.end == segment.start) return;
        emit_(Piece{piece_.text.substr(segment.start, segment.end - segment.start), piece_.atStart && segment.start == 0});
    }

    const Piece& piece_;
    SplitBehavior behavior_;
    PieceSink emit_;
    Segment pending_{};
    bool hasPending_ = false;
    bool previousWasMatch_ = false;
};

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
        : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

    void split(const Piece& piece, PieceSink emit) const override {
        splitAtMatches(
            piece, [this](std::string_view text, std::size_t from) { return pattern_.find(text, from); }, behavior_,
            invert_, emit);
    }

private:
    Pattern pattern_;
    SplitBehavior behavior_;
    bool invert_;
};

}  // namespace

SplitBehavior parseSplitBehavior(const std::string& name, const std::string& where) {
    if (name == "Removed") return SplitBehavior::Removed;
    if (name == "Isolated") return SplitBehavior::Isolated;
    if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (name == "Contiguous") return SplitBehavior::Contiguous;
    throwMalformed(where, "split behavior '" + name +
                              "' is unknown (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

void splitAtMatches(const Piece& piece, MatchFinder findMatch, SplitBehavior behavior, bool invert, PieceSink emit) {
    const std::string_view text = piece.text;
    SegmentJoiner joiner(piece, behavior, emit);
    std::size_t done = 0;
    while (done < text.size()) {
        const auto match = findMatch(text, done);
        if (!match) break;
        if (match->start > done) joiner.add({done, match->start, invert});
        joiner.add({match->start, match->end, !invert});
        done = match->end;
    }
    if (done < text.size()) joiner.add({done, text.size(), invert});
    joiner.flush();
}

std::unique_ptr<PreTokenizer> makeSplitPreTokenizer(const Json& config, const std::string& where) {
    return std::make_unique<SplitPreTokenizer>(Pattern::fromJson(requiredField(config, "pattern", where), where + ".pattern"),
                                               parseSplitBehavior(stringField(config, "behavior", where), where + ".behavior"),
                                               boolField(config, "invert", where, false));
}

}  // namespace tandem::text
