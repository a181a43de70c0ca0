// Host-to-device copy speed of a streamed layer's bytes (340 MB: a Qwen3-30B-A3B int4 layer) from the kinds
// of host memory prefill streaming could read: memory from cudaHostAlloc; anonymous memory with
// transparent huge pages, registered (cudaHostRegister); a file's pages mapped read-only and registered
// (what streaming reads from a store today); and the first kind as two halves on two streams at once.
// Built and run on the GPU machine:
//   nvcc -std=c++20 -arch=sm_90 -O2 scripts/bench_h2d.cu -o /tmp/bench-h2d && /tmp/bench-h2d [DIR]
// DIR (default /tmp) holds the temporary file.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::printf("%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

constexpr std::size_t kBytes = 340ull << 20;
constexpr int kReps = 5;

// Best GB/s of kReps copies of `bytes` from host to dev, in `parts` pieces over `parts` streams.
double copySpeed(const void* host, void* dev, std::size_t bytes, int parts) {
    cudaStream_t streams[4];
    for (int p = 0; p < parts; ++p) check(cudaStreamCreateWithFlags(&streams[p], cudaStreamNonBlocking), "stream");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    double best = 0;
    for (int r = 0; r < kReps; ++r) {
        check(cudaDeviceSynchronize(), "sync");
        check(cudaEventRecord(start, streams[0]), "record");
        for (int p = 1; p < parts; ++p) check(cudaStreamWaitEvent(streams[p], start, 0), "wait");
        const std::size_t piece = bytes / parts;
        for (int p = 0; p < parts; ++p)
            check(cudaMemcpyAsync(static_cast<char*>(dev) + p * piece, static_cast<const char*>(host) + p * piece, piece,
                                  cudaMemcpyHostToDevice, streams[p]),
                  "copy");
        for (int p = 1; p < parts; ++p) {
            cudaEvent_t done;
            check(cudaEventCreate(&done), "event");
            check(cudaEventRecord(done, streams[p]), "record");
            check(cudaStreamWaitEvent(streams[0], done, 0), "wait");
        }
        check(cudaEventRecord(stop, streams[0]), "record");
        check(cudaEventSynchronize(stop), "sync");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
        best = std::max(best, static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "/tmp";
    void* dev = nullptr;
    check(cudaMalloc(&dev, kBytes), "cudaMalloc");

    void* pinned = nullptr;
    check(cudaHostAlloc(&pinned, kBytes, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(pinned, 1, kBytes);
    std::printf("cudaHostAlloc                      %6.1f GB/s\n", copySpeed(pinned, dev, kBytes, 1));
    std::printf("cudaHostAlloc, 2 streams           %6.1f GB/s\n", copySpeed(pinned, dev, kBytes, 2));

    void* huge = std::aligned_alloc(2u << 20, kBytes);
    madvise(huge, kBytes, MADV_HUGEPAGE);
    std::memset(huge, 2, kBytes);
    check(cudaHostRegister(huge, kBytes, cudaHostRegisterDefault), "register anonymous");
    std::printf("anonymous, huge pages, registered  %6.1f GB/s\n", copySpeed(huge, dev, kBytes, 1));

    void* small = std::aligned_alloc(4096, kBytes);
    madvise(small, kBytes, MADV_NOHUGEPAGE);
    std::memset(small, 3, kBytes);
    check(cudaHostRegister(small, kBytes, cudaHostRegisterDefault), "register anonymous 4k");
    std::printf("anonymous, 4 KiB pages, registered %6.1f GB/s\n", copySpeed(small, dev, kBytes, 1));

    const std::string path = dir + "/tandem-h2d.bin";
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, small, kBytes) != static_cast<ssize_t>(kBytes)) {
        std::printf("cannot write %s\n", path.c_str());
        return 1;
    }
    void* mapped = mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd, 0);
    volatile char sink = 0;
    for (std::size_t i = 0; i < kBytes; i += 4096) sink = sink + static_cast<const char*>(mapped)[i];
    check(cudaHostRegister(mapped, kBytes, cudaHostRegisterReadOnly), "register file");
    std::printf("file pages, mapped, registered     %6.1f GB/s\n", copySpeed(mapped, dev, kBytes, 1));
    std::printf("pageable (not registered)          %6.1f GB/s\n",
                copySpeed(std::aligned_alloc(4096, kBytes), dev, kBytes, 1));
    unlink(path.c_str());
    return 0;
}
