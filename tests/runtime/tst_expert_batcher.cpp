// The expert batcher (runtime/expert_batcher.h): several runners' one-token submissions for a layer run
// as one computation of their tokens, each member getting exactly its own row and its hook once.
#include <QTest>
#include <memory>
#include <vector>

#include "runtime/expert_batcher.h"
#include "tandem/error.h"

using tandem::runtime::ExpertBatcher;

namespace {

constexpr int kHidden = 4;

// out[t] = Σ_s weight[t, s] · (id[t, s] + 1) · x[t] over the slots asked for; counts its calls' tokens.
class Scaling : public tandem::model::RoutedExperts {
public:
    explicit Scaling(std::vector<std::size_t>& calls) : calls_(calls) {}
    void run(int, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int first, int last,
             float* out) override {
        calls_.push_back(tokens);
        for (std::size_t t = 0; t < tokens; ++t)
            for (int c = 0; c < kHidden; ++c) {
                float v = 0;
                for (int s = first; s < last; ++s)
                    v += weights[t * topK + s] * static_cast<float>(ids[t * topK + s] + 1) * x[t * kHidden + c];
                out[t * kHidden + c] = v;
            }
    }

private:
    std::vector<std::size_t>& calls_;
};

struct Member {
    std::unique_ptr<tandem::model::QueuedRoutedExperts> view;
    std::vector<float> x = std::vector<float>(kHidden), out = std::vector<float>(kHidden, -1.0f),
                       deferredOut = std::vector<float>(kHidden, -1.0f);
    std::vector<int> ids;
    std::vector<float> weights;
    int hooks = 0;
};

}  // namespace

class ExpertBatcherTest : public QObject {
    Q_OBJECT

    std::vector<std::size_t> combinedCalls_, ownCalls_;
    std::unique_ptr<ExpertBatcher> batcher_;
    std::vector<Member> members_;

    void make(int n) {
        combinedCalls_.clear();
        ownCalls_.clear();
        members_.clear();
        batcher_ = std::make_unique<ExpertBatcher>(tandem::model::computeOnSubmit(std::make_unique<Scaling>(combinedCalls_)), kHidden);
        for (int i = 0; i < n; ++i) {
            Member m;
            m.view = batcher_->view(tandem::model::computeOnSubmit(std::make_unique<Scaling>(ownCalls_)));
            for (int c = 0; c < kHidden; ++c) m.x[static_cast<std::size_t>(c)] = static_cast<float>(i + 1) + 0.25f * c;
            m.ids = {i, i + 1, 7 - i};
            m.weights = {0.5f, 0.3f, 0.2f};
            members_.push_back(std::move(m));
        }
    }

    void submit(Member& m, int lane, int layer, int first, int last) {
        m.view->submit(lane, layer, m.x.data(), 1, m.ids.data(), m.weights.data(), 3, first, last,
                       first > 0 ? m.deferredOut.data() : m.out.data(),
                       [&m] { ++m.hooks; });
    }

    // What one member's part computes alone.
    static std::vector<float> alone(const Member& m, int first, int last) {
        std::vector<float> out(kHidden, 0.0f);
        for (int c = 0; c < kHidden; ++c)
            for (int s = first; s < last; ++s)
                out[static_cast<std::size_t>(c)] += m.weights[static_cast<std::size_t>(s)] * static_cast<float>(m.ids[static_cast<std::size_t>(s)] + 1) *
                                                    m.x[static_cast<std::size_t>(c)];
        return out;
    }

private slots:
    void outsideABatchEachRunsAlone() {
        make(2);
        submit(members_[0], 0, 3, 0, 3);
        QCOMPARE(ownCalls_.size(), std::size_t{1});
        QVERIFY(combinedCalls_.empty());
        QVERIFY(members_[0].view->done(0));
        QCOMPARE(members_[0].out, alone(members_[0], 0, 3));
        QCOMPARE(members_[0].hooks, 1);
    }

    void aBatchRunsOnceForAllMembers() {
        make(3);
        batcher_->open(3);
        submit(members_[0], 0, 5, 0, 3);
        submit(members_[1], 0, 5, 0, 3);
        QVERIFY(combinedCalls_.empty());  // held until every member has come
        QVERIFY(!members_[0].view->done(0));
        QCOMPARE(members_[0].hooks, 0);
        submit(members_[2], 0, 5, 0, 3);
        QCOMPARE(combinedCalls_, std::vector<std::size_t>{3});
        QVERIFY(ownCalls_.empty());
        QCOMPARE(batcher_->batchesRun(), 1L);
        for (auto& m : members_) {
            QVERIFY(m.view->done(0));
            m.view->wait(0);
            QCOMPARE(m.hooks, 1);
            QCOMPARE(m.out, alone(m, 0, 3));
        }
        // The next layer gathers again; its deferred part is a group of its own.
        for (auto& m : members_) submit(m, 0, 6, 0, 2);
        for (auto& m : members_) submit(m, 1, 6, 2, 3);
        QCOMPARE(combinedCalls_, (std::vector<std::size_t>{3, 3, 3}));
        for (auto& m : members_) {
            QCOMPARE(m.out, alone(m, 0, 2));
            QCOMPARE(m.deferredOut, alone(m, 2, 3));
            QCOMPARE(m.hooks, 3);
        }
        batcher_->close();
        submit(members_[1], 0, 7, 0, 3);  // closed: alone again
        QCOMPARE(ownCalls_.size(), std::size_t{1});
    }

    void closingRunsAnIncompleteGroup() {
        make(3);
        batcher_->open(3);
        submit(members_[0], 0, 2, 0, 3);
        submit(members_[2], 0, 2, 0, 3);
        QVERIFY(combinedCalls_.empty());
        batcher_->close();
        QCOMPARE(combinedCalls_, std::vector<std::size_t>{2});
        QCOMPARE(members_[0].out, alone(members_[0], 0, 3));
        QCOMPARE(members_[2].out, alone(members_[2], 0, 3));
        QCOMPARE(members_[1].hooks, 0);
    }

    void aLayerOutOfStepIsRefused() {
        make(2);
        batcher_->open(2);
        submit(members_[0], 0, 4, 0, 3);
        QVERIFY_THROWS_EXCEPTION(tandem::Error, submit(members_[1], 0, 6, 0, 3));
    }
};

QTEST_APPLESS_MAIN(ExpertBatcherTest)
#include "tst_expert_batcher.moc"
