#include "cpu/pool/cpu_topology.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <new>
#include <utility>

#include "tandem/error.h"

namespace tandem::cpu {

namespace {

bool numaWorks() {
    static const bool works = numa_available() >= 0;
    return works;
}

int readInt(const std::string& path, int fallback) {
    std::ifstream in(path);
    int v = fallback;
    return (in >> v) ? v : fallback;
}

struct LogicalCpu {
    int cpu, node, package, core;
};

// The CPUs the process may use, as the first call saw them. Not the calling thread's affinity at the
// time: an expert pool pins its caller to one CPU (ExpertPool::pinCaller), and the app loads a model it
// switches to on that same thread, which would then get a pool of one thread.
cpu_set_t processCpus() {
    static const cpu_set_t initial = [] {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0) {
            const long n = sysconf(_SC_NPROCESSORS_ONLN);
            for (int c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
        }
        return set;
    }();
    return initial;
}

std::vector<LogicalCpu> allowedCpus() {
    const cpu_set_t set = processCpus();
    std::vector<LogicalCpu> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
        const int node = numaWorks() ? std::max(0, numa_node_of_cpu(c)) : 0;
        cpus.push_back({c, node, readInt(base + "physical_package_id", 0), readInt(base + "core_id", c)});
    }
    return cpus;
}

}  // namespace

int CpuTopology::threads() const {
    int n = 0;
    for (const auto& node : nodes) n += static_cast<int>(node.cpus.size());
    return n;
}

std::string CpuTopology::describe() const {
    std::string s = std::to_string(threads()) + " threads on " + std::to_string(nodes.size()) +
                    (simulatedNodes > 1 ? " simulated" : "") + " NUMA node" + (nodes.size() == 1 ? "" : "s") + " (";
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        if (n) s += "; ";
        s += "node ";
        s += std::to_string(nodes[n].memoryNode);
        s += ": cpus";
        for (const int c : nodes[n].cpus) {
            s += ' ';
            s += std::to_string(c);
        }
    }
    return s + ")";
}

std::uint64_t availableMemoryBytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t kb = 0;
    while (in >> key >> kb) {
        if (key == "MemAvailable:") return kb * 1024;
        in.ignore(1 << 10, '\n');
    }
    return 8ull << 30;
}

CpuTopology planTopology(int threads, int simulatedNodes) {
    const std::vector<LogicalCpu> cpus = allowedCpus();
    // Per node: physical cores (first logical CPU of each core), then the remaining siblings.
    std::map<int, std::pair<std::vector<int>, std::vector<int>>> byNode;
    std::map<std::pair<int, int>, bool> seenCore;
    int physical = 0;
    for (const auto& c : cpus) {
        auto& [cores, siblings] = byNode[c.node];
        if (seenCore.emplace(std::make_pair(c.package, c.core), true).second) {
            cores.push_back(c.cpu);
            ++physical;
        } else {
            siblings.push_back(c.cpu);
        }
    }
    if (byNode.empty()) byNode[0].first.push_back(0), physical = 1;
    if (threads <= 0) threads = physical;

    // Round-robin over nodes so every node gets an equal share of the threads.
    std::vector<std::vector<int>> order;  // per node: its CPUs in the order workers take them
    std::vector<int> memoryNode;
    for (auto& [node, lists] : byNode) {
        std::vector<int> list = lists.first;
        list.insert(list.end(), lists.second.begin(), lists.second.end());
        order.push_back(list);
        memoryNode.push_back(node);
    }
    std::vector<std::vector<int>> picked(order.size());
    for (int t = 0; t < threads; ++t) {
        const std::size_t n = static_cast<std::size_t>(t) % order.size();
        const std::size_t i = picked[n].size();
        picked[n].push_back(order[n][i % order[n].size()]);  // more threads than CPUs: share them
    }

    CpuTopology topo;
    topo.numaAvailable = numaWorks();
    topo.physicalCores = physical;
    for (std::size_t n = 0; n < picked.size(); ++n)
        if (!picked[n].empty()) topo.nodes.push_back({memoryNode[n], picked[n]});

    if (simulatedNodes > 1) {
        if (simulatedNodes > threads)
            throw Error("TANDEM_NUMA_SIM=" + std::to_string(simulatedNodes) + " needs at least that many threads, not " +
                        std::to_string(threads));
        std::vector<std::pair<int, int>> all;  // (cpu, real node)
        for (const auto& node : topo.nodes)
            for (const int c : node.cpus) all.emplace_back(c, node.memoryNode);
        topo.nodes.clear();
        std::size_t at = 0;
        for (int s = 0; s < simulatedNodes; ++s) {
            const std::size_t count = all.size() / simulatedNodes + (static_cast<std::size_t>(s) < all.size() % simulatedNodes ? 1 : 0);
            PoolNode node;
            node.memoryNode = all[at].second;
            for (std::size_t i = 0; i < count; ++i) node.cpus.push_back(all[at + i].first);
            at += count;
            topo.nodes.push_back(std::move(node));
        }
        topo.simulatedNodes = simulatedNodes;
    }
    return topo;
}

bool bindToNode(void* data, std::size_t bytes, int node) {
    if (!numaWorks() || node < 0 || node > numa_max_node()) return false;
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
    if (end <= begin) return true;  // no whole page: nothing to bind
    std::vector<unsigned long> mask(static_cast<std::size_t>(numa_max_node()) / (8 * sizeof(unsigned long)) + 1, 0);
    mask[static_cast<std::size_t>(node) / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    return mbind(reinterpret_cast<void*>(begin), end - begin, MPOL_BIND, mask.data(), mask.size() * 8 * sizeof(unsigned long),
                 MPOL_MF_MOVE) == 0;
}

NodeMemory::NodeMemory(std::size_t bytes, int node) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
    madvise(p, bytes, MADV_HUGEPAGE);
    if (node >= 0) bound_ = bindToNode(p, bytes, node);
}

NodeMemory::~NodeMemory() {
    if (data_) munmap(data_, bytes_);
}

NodeMemory::NodeMemory(NodeMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), bound_(o.bound_) {}

NodeMemory& NodeMemory::operator=(NodeMemory&& o) noexcept {
    if (this != &o) {
        if (data_) munmap(data_, bytes_);
        data_ = std::exchange(o.data_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
        bound_ = o.bound_;
    }
    return *this;
}

}  // namespace tandem::cpu
