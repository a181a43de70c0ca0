#include "cpu/moe/packed_layer.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>

#include "tandem/error.h"

namespace tandem::cpu {

namespace {

std::size_t align64(std::size_t n) { return (n + 63) / 64 * 64; }

std::size_t gateUpBytes(const ExpertLayout& l, const NodeShare& s) {
    return static_cast<std::size_t>(s.panelCount) * l.gateUpPanelBytes;
}

std::size_t downBytes(const ExpertLayout& l, const NodeShare& s) {
    return l.chunkOffset(s.firstChunk + s.chunkCount) - l.chunkOffset(s.firstChunk);
}

std::size_t scaleBytes(const ExpertLayout& l) {
    return l.type == ExpertType::INT8 ? static_cast<std::size_t>(l.downPanels) * kPanelRows * sizeof(float) : 0;
}

}  // namespace

std::vector<NodeShare> splitAcrossNodes(const ExpertLayout& l, int nodes) {
    std::vector<NodeShare> shares(static_cast<std::size_t>(nodes));
    for (int n = 0; n < nodes; ++n) {
        const int c0 = l.chunks * n / nodes, c1 = l.chunks * (n + 1) / nodes;
        NodeShare& s = shares[n];
        s.firstChunk = c0;
        s.chunkCount = c1 - c0;
        s.firstPanel = l.firstPanelOfChunk(c0);
        s.panelCount = l.firstPanelOfChunk(c1) - s.firstPanel;
    }
    return shares;
}

namespace {

std::vector<const std::byte*> backToBack(const ExpertLayout& layout, int experts, const std::byte* bytes) {
    std::vector<const std::byte*> v;
    for (int e = 0; e < experts; ++e) v.push_back(bytes + static_cast<std::size_t>(e) * layout.expertBytes);
    return v;
}

}  // namespace

PackedMoeLayer::PackedMoeLayer(const ExpertLayout& layout, int experts, const std::byte* bytes, const CpuTopology& topology,
                               Placement placement)
    : PackedMoeLayer(layout, backToBack(layout, experts, bytes), topology, placement) {}

PackedMoeLayer::PackedMoeLayer(const ExpertLayout& layout, const std::vector<const std::byte*>& expertBytes,
                               const CpuTopology& topology, Placement placement)
    : layout_(layout), experts_(static_cast<int>(expertBytes.size())) {
    const int experts = experts_;
    if (experts <= 0) throw Error("a MoE layer needs at least one expert");
    for (const std::byte* b : expertBytes)
        if (reinterpret_cast<std::uintptr_t>(b) % 64 != 0)
            throw Error("packed experts must start on a 64-byte boundary (map the store file, or use aligned memory)");
    const int nodes = static_cast<int>(topology.nodes.size());
    shares_ = splitAcrossNodes(layout, nodes);
    experts_by_node_.assign(static_cast<std::size_t>(nodes), std::vector<ExpertShare>(static_cast<std::size_t>(experts)));
    if (placement == Placement::Auto) placement = nodes > 1 ? Placement::CopyToNodes : Placement::InPlace;

    for (int n = 0; n < nodes; ++n) {
        const NodeShare& s = shares_[n];
        const int memoryNode = topology.nodes[n].memoryNode;
        const std::size_t gu = gateUpBytes(layout, s), dn = downBytes(layout, s), sc = scaleBytes(layout);
        std::byte* copy = nullptr;
        if (placement == Placement::CopyToNodes) {
            memory_.emplace_back(static_cast<std::size_t>(experts) * (align64(gu) + align64(dn) + align64(sc)),
                                 topology.numaAvailable && nodes > 1 ? memoryNode : -1);
            copy = memory_.back().data();
            if (topology.numaAvailable && nodes > 1) {
                ++bindRequests_;
                if (!memory_.back().bound()) ++bindFailures_;
            }
        }
        for (int e = 0; e < experts; ++e) {
            const std::byte* expert = expertBytes[e];
            const std::byte* srcGateUp = expert + static_cast<std::size_t>(s.firstPanel) * layout.gateUpPanelBytes;
            const std::byte* srcDown = expert + layout.chunkOffset(s.firstChunk);
            const std::byte* srcScales = expert + layout.downScalesOffset;
            ExpertShare& out = experts_by_node_[n][e];
            if (copy) {
                std::memcpy(copy, srcGateUp, gu);
                out.gateUp = copy;
                copy += align64(gu);
                std::memcpy(copy, srcDown, dn);
                out.down = copy;
                copy += align64(dn);
                if (sc) {
                    std::memcpy(copy, srcScales, sc);
                    out.downScales = reinterpret_cast<const float*>(copy);
                    copy += align64(sc);
                }
            } else {
                out = {srcGateUp, srcDown, sc ? reinterpret_cast<const float*>(srcScales) : nullptr};
                if (nodes > 1 && topology.numaAvailable) {
                    bindRequests_ += 2;
                    if (!bindToNode(const_cast<std::byte*>(srcGateUp), gu, memoryNode)) ++bindFailures_;
                    if (!bindToNode(const_cast<std::byte*>(srcDown), dn, memoryNode)) ++bindFailures_;
                }
            }
        }
    }
}

void PackedMoeLayer::setEpilogue(const MoeExpertEpilogue& epi) {
    const auto experts = static_cast<std::size_t>(experts_);
    auto check = [&](const std::vector<float>& v, int width, const char* what) {
        if (!v.empty() && v.size() != experts * static_cast<std::size_t>(width))
            throw Error(std::string("the experts' ") + what + " holds " + std::to_string(v.size()) + " values, expected " +
                        std::to_string(experts_) + " experts x " + std::to_string(width));
        for (std::size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                throw Error(std::string("expert ") + std::to_string(i / width) + "'s " + what + " holds NaN or infinity; the checkpoint is damaged");
    };
    check(epi.gateBias, layout_.inter, "gate bias");
    check(epi.upBias, layout_.inter, "up bias");
    check(epi.downBias, layout_.hidden, "down bias");
    if (epi.activation == GatedActivation::ClampedSwiglu && !(epi.limit > 0.0f && std::isfinite(epi.limit) && std::isfinite(epi.alpha)))
        throw Error("the clamped SwiGLU needs a positive, finite limit and a finite alpha");
    auto padded = [&](const std::vector<float>& v) {
        std::vector<float> out;
        if (v.empty()) return out;
        out.assign(experts * static_cast<std::size_t>(layout_.interPad), 0.0f);
        for (std::size_t e = 0; e < experts; ++e)
            std::copy_n(v.data() + e * layout_.inter, layout_.inter, out.data() + e * layout_.interPad);
        return out;
    };
    gateBias_ = padded(epi.gateBias);
    upBias_ = padded(epi.upBias);
    downBias_ = epi.downBias;
    epilogues_.clear();
    if (epi.activation == GatedActivation::SiluMul && gateBias_.empty() && upBias_.empty()) return;  // the plain kernels
    epilogues_.resize(experts);
    for (std::size_t e = 0; e < experts; ++e) {
        GateUpEpilogue& g = epilogues_[e];
        g.activation = epi.activation;
        g.alpha = epi.alpha;
        g.limit = epi.limit;
        g.gateBias = gateBias_.empty() ? nullptr : gateBias_.data() + e * layout_.interPad;
        g.upBias = upBias_.empty() ? nullptr : upBias_.data() + e * layout_.interPad;
    }
}

}  // namespace tandem::cpu
