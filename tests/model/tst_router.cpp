// The routing variants on hand-made logits where each variant picks differently.
#include <QTest>
#include <cmath>

#include "model/router.h"

using namespace tandem::model;

namespace {

struct Route {
    std::vector<int> ids;
    std::vector<float> weights;
};

Route route(const RouterSpec& spec, const std::vector<float>& logits, const std::vector<float>& bias = {}) {
    Route r{std::vector<int>(static_cast<std::size_t>(spec.topK)), std::vector<float>(static_cast<std::size_t>(spec.topK))};
    routeToken(spec, logits.data(), static_cast<int>(logits.size()), bias.empty() ? nullptr : bias.data(), r.ids.data(),
               r.weights.data());
    return r;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

class RouterTest : public QObject {
    Q_OBJECT
private slots:
    void softmaxTopKNormalized() {  // Mixtral, Qwen3 with norm_topk_prob
        RouterSpec spec;
        spec.topK = 2;
        spec.normalize = true;
        const auto r = route(spec, {1, 2, 4, 3});
        QCOMPARE(r.ids, (std::vector<int>{2, 3}));
        const float e4 = std::exp(4.0f), e3 = std::exp(3.0f);
        QVERIFY(std::abs(r.weights[0] - e4 / (e4 + e3)) < 1e-6f);
        QVERIFY(std::abs(r.weights[1] - e3 / (e4 + e3)) < 1e-6f);
    }

    void softmaxTopKUnnormalized() {  // Qwen3 without norm_topk_prob, DeepSeek-V2 greedy
        RouterSpec spec;
        spec.topK = 1;
        spec.scale = 2.0f;
        const auto r = route(spec, {0, 0, std::log(2.0f)});
        QCOMPARE(r.ids, std::vector<int>{2});
        QVERIFY(std::abs(r.weights[0] - 2.0f * 0.5f) < 1e-6f);  // softmax probability 2/4, times the scale
    }

    void tiesGoToLowerIndex() {
        RouterSpec spec;
        spec.topK = 2;
        const auto r = route(spec, {1, 5, 5, 5});
        QCOMPARE(r.ids, (std::vector<int>{1, 2}));
    }

    void deepseekV2GroupLimitedByMax() {
        // Groups of two; groups are ranked by their best expert. Group 1 holds the 3rd-best expert
        // overall but its best is below group 2's, so it is excluded.
        RouterSpec spec;
        spec.selection = ExpertSelection::GroupLimitedByMax;
        spec.topK = 3;
        spec.numGroups = 4;
        spec.topKGroups = 2;
        const std::vector<float> logits{5, 0, 4.9f, 4.8f, 4.95f, 0, 0, 0};
        QCOMPARE(route(spec, logits).ids, (std::vector<int>{0, 4, 1}));
        spec.selection = ExpertSelection::TopK;
        QCOMPARE(route(spec, logits).ids, (std::vector<int>{0, 4, 2}));
    }

    void deepseekV3GroupsRankedByTopTwoSum() {
        RouterSpec spec;
        spec.scoring = ExpertScoring::Sigmoid;
        spec.selection = ExpertSelection::GroupLimitedByTop2;
        spec.topK = 2;
        spec.numGroups = 4;
        spec.topKGroups = 2;
        spec.normalize = true;
        spec.scale = 2.5f;
        // Group sums of the two best: g0 = 1.0, g1 = 1.76, g2 = 0.97, g3 = 0.1: groups 1 and 0 are kept,
        // although group 2 holds the second-best single expert.
        const std::vector<float> logits{3, -3, 2, 2, 2.5f, -3, -3, -3};
        const auto r = route(spec, logits);
        QCOMPARE(r.ids, (std::vector<int>{0, 2}));
        const float s0 = sigmoid(3), s2 = sigmoid(2);
        QVERIFY(std::abs(r.weights[0] - 2.5f * s0 / (s0 + s2)) < 1e-6f);
        QVERIFY(std::abs(r.weights[1] - 2.5f * s2 / (s0 + s2)) < 1e-6f);
    }

    void correctionBiasSteersChoiceNotWeights() {
        RouterSpec spec;
        spec.scoring = ExpertScoring::Sigmoid;
        spec.selection = ExpertSelection::GroupLimitedByTop2;
        spec.topK = 2;
        spec.numGroups = 4;
        spec.topKGroups = 2;
        spec.hasCorrectionBias = true;
        const std::vector<float> logits{3, -3, 2, 2, 2.5f, -3, -3, -3};
        std::vector<float> bias(8, 0.0f);
        bias[3] = 0.2f;  // expert 3 now outranks expert 0 in the choice
        bias[2] = -0.5f;
        const auto r = route(spec, logits, bias);
        // Chosen: 3 (0.88 + 0.2) and 0 (0.95); weights are the unbiased scores, heaviest first.
        QCOMPARE(r.ids, (std::vector<int>{0, 3}));
        QVERIFY(std::abs(r.weights[0] - sigmoid(3)) < 1e-6f);
        QVERIFY(std::abs(r.weights[1] - sigmoid(2)) < 1e-6f);
    }

    void excludedGroupsNeverChosen() {
        // Even when the kept group's biased scores are negative, excluded experts stay out (transformers
        // masks excluded groups with 0.0, which would let them win here; DeepSeek's reference masks with -inf).
        RouterSpec spec;
        spec.scoring = ExpertScoring::Sigmoid;
        spec.selection = ExpertSelection::GroupLimitedByTop2;
        spec.topK = 4;
        spec.numGroups = 2;
        spec.topKGroups = 1;
        std::vector<float> bias{-2, -2, -2, -2, -2.5f, -2.5f, -2.5f, -2.5f};
        const auto r = route(spec, {1, 1, 1, 1, -5, -5, -5, -5}, bias);
        for (const int id : r.ids) QVERIFY2(id < 4, "an expert of the excluded group was chosen");
    }
};

QTEST_APPLESS_MAIN(RouterTest)
#include "tst_router.moc"
