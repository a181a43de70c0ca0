#pragma once
// A MoE layer's routed experts in the packed layout, arranged for an expert pool's NUMA nodes. Every
// expert's intermediate dimension is split across the nodes in 128-wide chunks (io/expert_layout.h):
// node n owns chunks [firstChunk, firstChunk + chunkCount) of down and the gate/up panels that make
// those intermediate columns, so each node's threads read only memory bound to that node and produce
// a partial output that the layer sums. With one node the packed bytes are used where they lie (a
// mapped store file, say): no copy, no special case.
#include <cstddef>
#include <vector>

#include "cpu/kernels/expert_kernels.h"
#include "cpu/pool/cpu_topology.h"
#include "cpu/packed_format.h"

namespace tandem::cpu {

// One node's part of every expert.
struct NodeShare {
    int firstChunk = 0, chunkCount = 0;  // of down's K chunks
    int firstPanel = 0, panelCount = 0;  // of gate/up's panels
};

// Where the kernels find one expert's share on one node.
struct ExpertShare {
    const std::byte* gateUp = nullptr;   // gate/up panel NodeShare::firstPanel
    const std::byte* down = nullptr;     // down chunk NodeShare::firstChunk
    const float* downScales = nullptr;   // INT8: the scales of all down rows
};

// Experts with biases and another gated activation (gpt-oss): what PackedMoeLayer::setEpilogue takes.
// Float32, expert e's values at e * inter (gateBias, upBias: one per intermediate row) and e * hidden
// (downBias: one per output); an empty vector is no such bias. Per chosen expert the layer computes
//   out += weight * (down . act(gate . x + gateBias, up . x + upBias) + downBias)
// with act SiLU(g) * u or gpt-oss's clamped SwiGLU (GatedActivation, expert_kernels.h).
struct MoeExpertEpilogue {
    GatedActivation activation = GatedActivation::SiluMul;
    float alpha = 1.702f;  // ClampedSwiglu
    float limit = 7.0f;    // ClampedSwiglu: swiglu_limit
    std::vector<float> gateBias, upBias, downBias;
};

class PackedMoeLayer {
public:
    enum class Placement {
        Auto,         // one node: in place; several: CopyToNodes
        InPlace,      // read where they lie; with several nodes each share's pages are bound (moved) to its
                      // node, which works for anonymous memory the caller owns but not for mapped files
        CopyToNodes,  // each node's shares copied into memory bound to that node
    };

    // `experts` packed experts back to back from `bytes`, expert e at e * layout.expertBytes, 64-byte
    // aligned; they must outlive the layer unless copied. `topology` is the pool's (ExpertPool::topology()).
    PackedMoeLayer(const ExpertLayout& layout, int experts, const std::byte* bytes, const CpuTopology& topology,
                   Placement placement = Placement::Auto);
    // The same with each expert's packed bytes wherever they are (several store files, say).
    PackedMoeLayer(const ExpertLayout& layout, const std::vector<const std::byte*>& experts, const CpuTopology& topology,
                   Placement placement = Placement::Auto);

    const ExpertLayout& layout() const { return layout_; }
    int experts() const { return experts_; }
    int nodes() const { return static_cast<int>(shares_.size()); }
    const NodeShare& share(int node) const { return shares_[node]; }
    const ExpertShare& expert(int node, int e) const { return experts_by_node_[node][e]; }
    bool copied() const { return !memory_.empty(); }
    int bindRequests() const { return bindRequests_; }
    int bindFailures() const { return bindFailures_; }

    // Gives every expert biases and/or another activation (copied). Throws tandem::Error when a bias
    // vector is neither empty nor experts x its width, or a bias is NaN or infinite.
    void setEpilogue(const MoeExpertEpilogue& epilogue);
    // Expert e's gate/up epilogue for the kernels; null when the layer has none (SiLU, no biases).
    const GateUpEpilogue* gateUpEpilogue(int e) const { return epilogues_.empty() ? nullptr : &epilogues_[e]; }
    // Expert e's down bias (hidden floats), or null.
    const float* downBias(int e) const { return downBias_.empty() ? nullptr : downBias_.data() + static_cast<std::size_t>(e) * layout_.hidden; }

private:
    ExpertLayout layout_;
    int experts_ = 0;
    std::vector<NodeShare> shares_;
    std::vector<std::vector<ExpertShare>> experts_by_node_;
    std::vector<NodeMemory> memory_;
    int bindRequests_ = 0;
    int bindFailures_ = 0;
    std::vector<float> gateBias_, upBias_;  // [experts][interPad], zero past inter
    std::vector<float> downBias_;           // [experts][hidden]
    std::vector<GateUpEpilogue> epilogues_; // per expert, pointing into the biases; empty: none
};

// The even split of `chunks` chunks over `nodes` nodes.
std::vector<NodeShare> splitAcrossNodes(const ExpertLayout& layout, int nodes);

}  // namespace tandem::cpu
