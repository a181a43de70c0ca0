#pragma once
// Where the expert pool's workers run and where memory goes: one logical CPU per physical core,
// grouped by NUMA node (libnuma), and binding of memory to a node. TANDEM_NUMA_SIM=N splits the
// chosen cores into N pretend nodes (each bound to the real node of its cores), so the multi-node
// partition, binding calls and reduction run on a one-node machine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::cpu {

struct PoolNode {
    int memoryNode = 0;     // the real NUMA node memory of this node is bound to
    std::vector<int> cpus;  // the logical CPU of each worker of this node
};

struct CpuTopology {
    std::vector<PoolNode> nodes;
    bool numaAvailable = false;  // libnuma works here, so binding calls are made
    int simulatedNodes = 0;      // > 1 when the nodes are pretend ones
    int physicalCores = 0;       // that this process may run on
    int threads() const;
    std::string describe() const;  // "16 threads on 1 NUMA node (cores 0-15)"
};

// Picks `threads` CPUs (<= 0: one per physical core this process may use), physical cores before
// hyperthread siblings, spread evenly over the NUMA nodes; then, if simulatedNodes > 1, splits them
// into that many pretend nodes. Throws tandem::Error when simulatedNodes exceeds the thread count.
CpuTopology planTopology(int threads, int simulatedNodes);

// MemAvailable of /proc/meminfo: what can be allocated without swapping (8 GiB when unreadable).
std::uint64_t availableMemoryBytes();

// Binds the whole pages inside [data, data + bytes) to `node`, moving pages already touched.
// Returns false when the kernel refused or libnuma is missing (the memory then stays where it is).
bool bindToNode(void* data, std::size_t bytes, int node);

// Anonymous, page-aligned memory, optionally bound to a node before first touch, with transparent
// huge pages requested (fewer TLB misses when streaming expert weights).
class NodeMemory {
public:
    NodeMemory() = default;
    NodeMemory(std::size_t bytes, int node);  // node < 0: no binding
    ~NodeMemory();
    NodeMemory(NodeMemory&& o) noexcept;
    NodeMemory& operator=(NodeMemory&& o) noexcept;
    NodeMemory(const NodeMemory&) = delete;
    NodeMemory& operator=(const NodeMemory&) = delete;

    std::byte* data() const { return data_; }
    std::size_t size() const { return bytes_; }
    bool bound() const { return bound_; }

private:
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
    bool bound_ = false;
};

}  // namespace tandem::cpu
