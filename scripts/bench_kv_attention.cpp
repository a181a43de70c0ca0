// Decode attention over a long KV cache, float32 against int8 (issue 28), the CPU kernels alone: one token at
// position DEPTH - 1 of LAYERS separate caches (so they do not sit in the CPU's caches between steps),
// alternating float32 and int8 REPS times; prints the best time a layer of each and the cache bytes it read.
// GQA with Qwen3-30B-A3B's heads (32 query heads, 4 key heads of 128), or MLA with DeepSeek-V2-Lite's (16
// heads, latent 512 + rope 64).
//
//   g++ -O3 -DNDEBUG -std=c++20 -I engine -I engine/include scripts/bench_kv_attention.cpp \
//       build/engine/libtandem_engine.a -lpthread -lnuma -o /tmp/bench_kv_attention
//   /tmp/bench_kv_attention [gqa|mla] [DEPTH 8192] [LAYERS 12] [REPS 10] [THREADS 2]
//
// gqa-prompt or mla-prompt: a prompt of DEPTH tokens instead (all its tokens' queries in one call, as the CPU
// path's prefill makes it), timed with its multiply-adds (two a query-key pair and dimension: the scores and
// the weighted values) as GFLOP/s.
//
// TANDEM_CPU_ISA=avx2 runs the 8-lane kernels.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/dense/gqa_attention.h"
#include "cpu/pool/thread_pool.h"
#include "model/kv_cache.h"

using namespace tandem;

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "gqa";
    const bool mla = mode.rfind("mla", 0) == 0, prompt = mode.find("-prompt") != std::string::npos;
    const int depth = argc > 2 ? std::atoi(argv[2]) : 8192, layers = argc > 3 ? std::atoi(argv[3]) : 12;
    const int reps = argc > 4 ? std::atoi(argv[4]) : 10;
    cpu::ThreadPool pool(argc > 5 ? std::atoi(argv[5]) : 2);
    if (cpu::selectedIsa() < cpu::Isa::Avx2) {
        std::fprintf(stderr, "the attention kernels need AVX2\n");
        return 1;
    }
    const int heads = mla ? 16 : 32, kvHeads = 4, headDim = 128, latent = 512, rope = 64;
    const std::vector<int> widths = mla ? std::vector<int>{latent, rope} : std::vector<int>{kvHeads * headDim, kvHeads * headDim};
    const std::vector<int> groups = mla ? std::vector<int>{latent, rope} : std::vector<int>{headDim, headDim};
    std::vector<model::KvCache> caches[2];
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> row(static_cast<std::size_t>(widths[0]));
    for (int l = 0; l < layers; ++l)
        for (int type = 0; type < 2; ++type) {
            caches[type].emplace_back(1, widths, depth, type ? KvCacheType::Int8 : KvCacheType::Float32, groups);
            caches[type].back().reserve(depth);
        }
    for (int l = 0; l < layers; ++l)
        for (int p = 0; p < depth; ++p)
            for (int s = 0; s < 2; ++s) {
                for (int i = 0; i < widths[s]; ++i) row[i] = normal(rng);
                caches[0][l].write(0, s, p, row.data());
                caches[1][l].write(0, s, p, row.data());
            }
    const std::size_t qFloats = mla ? static_cast<std::size_t>(heads) * (latent + rope) : static_cast<std::size_t>(heads) * headDim;
    const int tokens = prompt ? depth : 1;  // the queries of one call, the last at position depth - 1
    const std::size_t outFloats = mla ? static_cast<std::size_t>(heads) * latent : qFloats;
    std::vector<float> q(qFloats * tokens), out(outFloats * tokens);
    for (float& x : q) x = normal(rng);
    const bool avx512 = cpu::selectedIsa() >= cpu::Isa::Avx512;
    double best[2] = {1e9, 1e9};
    for (int rep = 0; rep < reps; ++rep)
        for (int type = 0; type < 2; ++type) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int l = 0; l < layers; ++l) {
                model::KvCache& c = caches[type][l];
                if (mla) {
                    cpu::MlaAttentionArgs a;
                    a.qLatent = q.data();
                    a.qRope = q.data() + static_cast<std::size_t>(heads) * latent * tokens;
                    a.qRopeHead = rope;
                    if (type) {
                        a.latentCodes = c.codes(0, 0, 0, 0);
                        a.latentScales = c.scale(0, 0, 0, 0);
                        a.ropeCodes = c.codes(0, 1, 0, 0);
                        a.ropeScales = c.scale(0, 1, 0, 0);
                    } else {
                        a.latentRows = c.row(0, 0, 0);
                        a.ropeRows = c.row(0, 1, 0);
                    }
                    a.tokens = tokens;
                    a.start = depth - tokens;
                    a.heads = heads;
                    a.latent = latent;
                    a.ropeDim = rope;
                    a.scale = 0.07f;
                    a.out = out.data();
                    avx512 ? cpu::mlaAttentionAvx512(a, pool) : cpu::mlaAttentionAvx2(a, pool);
                } else {
                    cpu::GqaAttentionArgs a;
                    a.q = q.data();
                    if (type) {
                        a.keyCodes = c.codes(0, 0, 0, 0);
                        a.keyScales = c.scale(0, 0, 0, 0);
                        a.valueCodes = c.codes(0, 1, 0, 0);
                        a.valueScales = c.scale(0, 1, 0, 0);
                        a.codesHead = c.groupStride(0);
                        a.scalesHead = c.scaleGroupStride();
                    } else {
                        a.keys = c.row(0, 0, 0);
                        a.values = c.row(0, 1, 0);
                    }
                    a.tokens = tokens;
                    a.start = depth - tokens;
                    a.heads = heads;
                    a.kvHeads = kvHeads;
                    a.headDim = headDim;
                    a.scale = 0.088f;
                    a.out = out.data();
                    avx512 ? cpu::gqaAttentionAvx512(a, pool) : cpu::gqaAttentionAvx2(a, pool);
                }
            }
            best[type] = std::min(best[type], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / layers);
        }
    if (prompt) {
        // Query t sees t + 1 positions: dims multiply-adds for its score and as many for its weighted values.
        const double dims = mla ? 2.0 * latent + rope : 2.0 * headDim;
        const double flops = 2.0 * dims * heads * (static_cast<double>(depth) * (depth + 1) / 2);
        for (int type = 0; type < 2; ++type)
            std::printf("%s %s prompt of %d tokens: best %.1f ms a layer, %.1f GFLOP/s\n", mla ? "MLA" : "GQA",
                        type ? "int8   " : "float32", depth, best[type] * 1e3, flops / best[type] / 1e9);
        return 0;
    }
    for (int type = 0; type < 2; ++type) {
        const double bytes = static_cast<double>(caches[type][0].bytesPerPosition()) * depth;
        std::printf("%s %s, %d positions: best %.3f ms a layer, %.1f MB of cache a layer (%.1f GB/s)\n", mla ? "MLA" : "GQA",
                    type ? "int8   " : "float32", depth, best[type] * 1e3, bytes / 1e6, bytes / best[type] / 1e9);
    }
    std::printf("int8 / float32 time: %.2f\n", best[1] / best[0]);
}
