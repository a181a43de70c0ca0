#include "runtime/model_runner.h"

namespace tandem::runtime {

namespace {

class CpuRunner : public ModelRunner {
public:
    CpuRunner(model::Transformer& transformer, int capacity)
        : transformer_(transformer), cache_(transformer.makeCache(capacity)) {}

    void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                 std::vector<float>& logits) override {
        transformer_.forward(tokens, start, cache_, options, logits);
    }

private:
    model::Transformer& transformer_;
    KvCache cache_;
};

}  // namespace

std::unique_ptr<ModelRunner> makeCpuRunner(model::Transformer& transformer, int capacity) {
    return std::make_unique<CpuRunner>(transformer, capacity);
}

}  // namespace tandem::runtime
