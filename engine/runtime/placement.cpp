#include "runtime/placement.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "io/output_file.h"
#include "io/text_file.h"
#include "tandem/byte_size.h"

namespace tandem::runtime {

namespace {

constexpr const char* kUsageFileName = "tandem-expert-usage.json";

}  // namespace

ExpertUsage ExpertUsage::empty(const model::ModelConfig& config) {
    ExpertUsage u;
    u.counts.resize(static_cast<std::size_t>(config.numLayers));
    for (const model::LayerPlan& layer : config.layers)
        if (layer.moe) u.counts[static_cast<std::size_t>(layer.index)].assign(static_cast<std::size_t>(config.numExperts), 0);
    return u;
}

std::size_t ExpertUsage::add(int layer, const int* ids, std::size_t count) {
    auto& row = counts[static_cast<std::size_t>(layer)];
    std::size_t counted = 0;
    for (std::size_t i = 0; i < count; ++i)
        if (ids[i] >= 0 && static_cast<std::size_t>(ids[i]) < row.size()) {
            ++row[static_cast<std::size_t>(ids[i])];
            ++counted;
        }
    return counted;
}

std::uint64_t ExpertUsage::total() const {
    std::uint64_t n = 0;
    for (const auto& row : counts) n = std::accumulate(row.begin(), row.end(), n);
    return n;
}

ExpertUsage ExpertUsage::load(const std::filesystem::path& storeDir, const model::ModelConfig& config) {
    ExpertUsage u = empty(config);
    const std::filesystem::path file = storeDir / kUsageFileName;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return u;
    try {
        const auto j = io::parseJson<nlohmann::json>(io::readRegularFile(file), file.string());
        const auto& layers = j.at("counts");
        if (!layers.is_array() || layers.size() != u.counts.size()) return u;
        ExpertUsage read = u;
        for (std::size_t l = 0; l < layers.size(); ++l) {
            const auto& row = layers[l];
            if (!row.is_array() || row.size() != read.counts[l].size()) return u;
            for (std::size_t e = 0; e < row.size(); ++e) read.counts[l][e] = row[e].get<std::uint64_t>();
        }
        return read;
    } catch (const std::exception&) {
        return u;  // counts are a hint: a damaged file only costs the hint
    }
}

bool ExpertUsage::save(const std::filesystem::path& storeDir, std::string& problem) const {
    nlohmann::json j;
    j["what"] = "how often each routed expert was chosen, per layer; Tandem places the most used on the GPU";
    j["counts"] = counts;
    try {
        io::writeFileAtomically(storeDir / kUsageFileName, j.dump());
        return true;
    } catch (const std::exception& e) {
        problem = e.what();
        return false;
    }
}

void UsageCounter::add(int layer, const int* ids, std::size_t count) {
    const std::lock_guard lock(mutex_);
    if (layer < 0 || static_cast<std::size_t>(layer) >= usage_.counts.size()) return;
    added_ += usage_.add(layer, ids, count);
}

ExpertUsage UsageCounter::snapshot() const {
    const std::lock_guard lock(mutex_);
    return usage_;
}

std::uint64_t UsageCounter::added() const {
    const std::lock_guard lock(mutex_);
    return added_;
}

bool ExpertPlacement::wholeLayer(int layer) const {
    const auto& row = gpu[static_cast<std::size_t>(layer)];
    return !row.empty() && std::all_of(row.begin(), row.end(), [](bool b) { return b; });
}

bool ExpertPlacement::splitLayer(int layer) const {
    const auto& row = gpu[static_cast<std::size_t>(layer)];
    return std::any_of(row.begin(), row.end(), [](bool b) { return b; }) && !wholeLayer(layer);
}

std::string ExpertPlacement::describe(const model::ModelConfig& config) const {
    if (gpuExperts == 0) return "all routed experts on the CPU";
    int split = 0;
    for (int l = 0; l < config.numLayers; ++l) split += splitLayer(l) ? 1 : 0;
    std::string text = std::to_string(wholeLayers) + " of " + std::to_string(config.moeLayerCount()) +
                       " MoE layers wholly on the GPU";
    const int partial = gpuExperts - wholeLayers * config.numExperts;
    if (split > 0)
        text += ", " + std::to_string(partial) + " single experts in " + std::to_string(split) + " more" +
                (split == 1 ? " layer" : " layers");
    return text + " (" + formatBytes(gpuBytes) + ")";
}

std::string cpuExpertLayerMap(const model::ModelConfig& config) {
    if (config.numExperts == 0) return {};
    std::string map(static_cast<std::size_t>(config.numLayers), '-');
    for (int l = 0; l < config.numLayers; ++l)
        if (config.isMoeLayer(l)) map[static_cast<std::size_t>(l)] = 'C';
    return map;
}

std::vector<model::LayerPlan> placedLayers(const std::vector<model::LayerPlan>& layers, const ExpertPlacement& placement) {
    std::vector<model::LayerPlan> out = layers;
    const auto onGpu = [&](int l) { return static_cast<std::size_t>(l) < placement.gpu.size() && placement.wholeLayer(l); };
    for (model::LayerPlan& layer : out) {
        if (!layer.moe) continue;
        if (onGpu(layer.index)) {
            layer.mayDefer = false;
            if (layer.deferredFrom >= 0) out[static_cast<std::size_t>(layer.deferredFrom)].mayDefer = false;
            layer.deferredFrom = -1;
        }
    }
    return out;
}

std::vector<model::LayerPlan> stageLayers(const std::vector<model::LayerPlan>& layers, int firstLayer, int endLayer) {
    std::vector<model::LayerPlan> out = layers;
    const auto inStage = [&](int l) { return l >= firstLayer && l < endLayer; };
    for (model::LayerPlan& layer : out)
        if (layer.deferredFrom >= 0 && inStage(layer.index) != inStage(layer.deferredFrom)) {
            out[static_cast<std::size_t>(layer.deferredFrom)].mayDefer = false;
            layer.deferredFrom = -1;
        }
    return out;
}

double StreamCost::cpuSecondsPerTokenExpert(int tokens) const {
    if (cpu.empty()) return 0;
    if (tokens <= cpu.front().first) return cpu.front().second;
    for (std::size_t i = 1; i < cpu.size(); ++i)
        if (tokens <= cpu[i].first) {
            const auto [t0, s0] = cpu[i - 1];
            const auto [t1, s1] = cpu[i];
            return s0 + (s1 - s0) * static_cast<double>(tokens - t0) / static_cast<double>(t1 - t0);
        }
    return cpu.back().second;
}

std::string StreamCost::describe() const {
    char text[160];
    std::string out;
    std::snprintf(text, sizeof text, "link %.1f GB/s", linkBytesPerSecond * 1e-9);
    out = text;
    for (const auto& [tokens, seconds] : cpu) {
        std::snprintf(text, sizeof text, ", CPU %.2f us per token-expert at %d tokens", seconds * 1e6, tokens);
        out += text;
    }
    return out;
}

// A CPU share must make a streamed layer at least this much faster than the link alone (predicted).
constexpr double kStreamShareMinGain = 0.95;

int streamCpuExperts(const StreamCost& cost, int experts, int tokens, double gpuFirstSeconds, double handOverSeconds) {
    const double perTokenExpert = cost.cpuSecondsPerTokenExpert(tokens);
    if (cost.linkBytesPerSecond <= 0 || perTokenExpert <= 0 || cost.expertBytes == 0 || experts <= 0 || tokens <= 0)
        return 0;
    const double copy = static_cast<double>(cost.expertBytes) / cost.linkBytesPerSecond;  // per expert
    const double cpu = static_cast<double>(tokens) * perTokenExpert;                     // per expert
    const double before = std::max(0.0, gpuFirstSeconds) + std::max(0.0, handOverSeconds);
    const double share = 0.9 * (static_cast<double>(experts) * copy - before) / (copy + cpu);
    const int k = std::clamp(static_cast<int>(share), 0, experts - 1);
    // A share pays the hand-over whatever its size: worth it only for a clear gain over the link alone.
    const double withShare = std::max(static_cast<double>(experts - k) * copy, before + static_cast<double>(k) * cpu);
    return withShare <= kStreamShareMinGain * static_cast<double>(experts) * copy ? k : 0;
}

int StreamShareVerdicts::bucket(int tokens) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(tokens, 1)))); }

bool StreamShareVerdicts::vetoed(int tokens) const {
    return std::find(vetoed_.begin(), vetoed_.end(), bucket(tokens)) != vetoed_.end();
}

void StreamShareVerdicts::record(int tokens, int share, double secondsPerLayer, double predictedLinkAlone) {
    if (!(secondsPerLayer > 0)) return;
    if (!warm_) {
        warm_ = true;
        return;
    }
    const int b = bucket(tokens);
    auto timed = std::find_if(linkAlone_.begin(), linkAlone_.end(), [&](const auto& m) { return m.first == b; });
    if (share == 0) {
        if (timed == linkAlone_.end()) linkAlone_.emplace_back(b, secondsPerLayer);
        else timed->second = secondsPerLayer;
        return;
    }
    const double linkAlone = timed != linkAlone_.end() ? timed->second : predictedLinkAlone;
    if (linkAlone > 0 && secondsPerLayer >= kVetoRatio * linkAlone && !vetoed(tokens)) vetoed_.push_back(b);
}

const StreamCopyChoice::Bucket* StreamCopyChoice::find(int tokens) const {
    const int b = StreamShareVerdicts::bucket(tokens);
    for (const Bucket& x : buckets_)
        if (x.size == b) return &x;
    return nullptr;
}

StreamCopyChoice::Bucket& StreamCopyChoice::bucketFor(int tokens) {
    const int size = StreamShareVerdicts::bucket(tokens);
    for (Bucket& x : buckets_)
        if (x.size == size) return x;
    return buckets_.emplace_back(Bucket{size});
}

double StreamCopyChoice::routedShare(int tokens) const {
    const Bucket* b = find(tokens);
    return b ? b->routedShare : 1.0;
}

bool StreamCopyChoice::routed(int tokens) const {
    const Bucket* b = find(tokens);
    if (!b || b->routedShare >= kMaxRouted) return false;
    // Untried, or faster: than whole layers as timed, else as the link would copy them.
    if (b->seconds[1] == 0) return true;
    const double whole = b->seconds[0] > 0 ? b->seconds[0] : b->predictedWhole;
    return whole <= 0 || b->seconds[1] < whole;
}

void StreamCopyChoice::record(int tokens, bool routedCopies, double share, double secondsPerLayer, double wholeLayerSeconds) {
    Bucket& b = bucketFor(tokens);
    if (share >= 0 && share <= 1) b.routedShare = share;
    if (wholeLayerSeconds > 0) b.predictedWhole = wholeLayerSeconds;
    if (!warm_) {
        warm_ = true;
        return;
    }
    if (secondsPerLayer > 0) b.seconds[routedCopies ? 1 : 0] = secondsPerLayer;
}

ExpertPlacement planPlacement(const model::ModelConfig& config, const PlacementRequest& request) {
    ExpertPlacement p;
    p.gpu.resize(static_cast<std::size_t>(config.numLayers));
    std::vector<int> moe;  // the MoE layers of the range
    const int end = request.endLayer < 0 ? config.numLayers : request.endLayer;
    for (const model::LayerPlan& layer : config.layers)
        if (layer.moe) {
            if (layer.index >= request.firstLayer && layer.index < end) moe.push_back(layer.index);
            p.gpu[static_cast<std::size_t>(layer.index)].assign(static_cast<std::size_t>(config.numExperts), false);
        }
    if (request.expertBytes == 0 || moe.empty()) return p;
    std::uint64_t left = request.budgetBytes;
    const std::uint64_t layerBytes = request.expertBytes * static_cast<std::uint64_t>(config.numExperts);
    const auto place = [&](int layer, int expert) {
        p.gpu[static_cast<std::size_t>(layer)][static_cast<std::size_t>(expert)] = true;
        ++p.gpuExperts;
        p.gpuBytes += request.expertBytes;
        left -= request.expertBytes;
    };

    // 1. Whole layers, the last first.
    std::vector<int> cpuLayers;
    for (auto it = moe.rbegin(); it != moe.rend(); ++it) {
        if (left >= layerBytes && static_cast<int>(cpuLayers.size()) == 0) {
            for (int e = 0; e < config.numExperts; ++e) place(*it, e);
            ++p.wholeLayers;
        } else {
            cpuLayers.push_back(*it);  // from the last CPU layer backwards
        }
    }
    if (left < request.expertBytes || cpuLayers.empty()) return p;

    // 2. Single experts: the most used first; without counts, the next layer's in order.
    struct Candidate {
        double share;  // of its layer's choices
        int order;     // the layer's rank among cpuLayers, then the expert: the fallback order
        int layer, expert;
    };
    std::vector<Candidate> candidates;
    for (std::size_t rank = 0; rank < cpuLayers.size(); ++rank) {
        const int l = cpuLayers[rank];
        const auto& row = request.usage.counts.size() > static_cast<std::size_t>(l) ? request.usage.counts[static_cast<std::size_t>(l)]
                                                                                      : std::vector<std::uint64_t>{};
        const std::uint64_t routed = std::accumulate(row.begin(), row.end(), std::uint64_t{0});
        for (int e = 0; e < config.numExperts; ++e) {
            const double share = routed && row.size() == static_cast<std::size_t>(config.numExperts)
                                     ? static_cast<double>(row[static_cast<std::size_t>(e)]) / static_cast<double>(routed)
                                     : 0.0;
            candidates.push_back({share, static_cast<int>(rank), l, e});
        }
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        if (a.share != b.share) return a.share > b.share;
        return a.order != b.order ? a.order < b.order : a.expert < b.expert;
    });
    for (const Candidate& c : candidates) {
        if (left < request.expertBytes) break;
        place(c.layer, c.expert);
    }
    return p;
}

ExpertPlacement mergePlacements(const model::ModelConfig& config, const std::vector<ExpertPlacement>& placements) {
    ExpertPlacement merged = planPlacement(config, {});  // every row, nothing on the GPU
    for (const ExpertPlacement& part : placements) {
        if (part.gpu.size() != merged.gpu.size()) throw std::logic_error("mergePlacements: a placement of another model");
        for (std::size_t l = 0; l < part.gpu.size(); ++l) {
            if (part.gpu[l].size() != merged.gpu[l].size()) throw std::logic_error("mergePlacements: a placement of another model");
            for (std::size_t e = 0; e < part.gpu[l].size(); ++e) {
                if (!part.gpu[l][e]) continue;
                if (merged.gpu[l][e])
                    throw std::logic_error("mergePlacements: layer " + std::to_string(l) + "'s expert " + std::to_string(e) +
                                           " placed by two stages");
                merged.gpu[l][e] = true;
            }
        }
        merged.wholeLayers += part.wholeLayers;
        merged.gpuExperts += part.gpuExperts;
        merged.gpuBytes += part.gpuBytes;
    }
    return merged;
}

}  // namespace tandem::runtime
