// Mixtral (model_type mixtral): grouped-query attention, softmax top-2 routing with the chosen weights
// normalized, every layer a mixture of experts named block_sparse_moe.experts.E.w1/w3/w2.
#include "model/config_fields.h"
#include "model/family.h"

namespace tandem::model {

namespace {

void readMixtral(const ConfigFields& f, ModelConfig& c) {
    readGqaAttention(f, c);
    if (f.has("sliding_window")) c.slidingWindow = f.get<int>("sliding_window");
    c.numExperts = f.get<int>("num_local_experts");
    c.moeIntermediateSize = f.get<int>("intermediate_size");
    c.intermediateSize = c.moeIntermediateSize;
    c.router.topK = f.get<int>("num_experts_per_tok", 2);
    c.router.normalize = true;
}

bool everyLayer(const ModelConfig&, int) { return true; }

}  // namespace

extern const Family kMixtralFamily{"mixtral", {"mixtral"}, readMixtral, everyLayer,
                                   {"block_sparse_moe", "w1", "w3", "w2"}, /*ggufPermutesQk=*/true};

}  // namespace tandem::model
