#include "cuda/gpu_weights.h"

#include <cstring>

#include "io/dtype.h"

namespace tandem::cuda {

namespace {

using model::WeightMatrix;

std::uint64_t rowsTimesCols(std::initializer_list<std::pair<std::int64_t, std::int64_t>> shapes) {
    std::uint64_t n = 0;
    for (const auto& [r, c] : shapes) n += static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(c);
    return n;
}

// Stacks the rows of `parts` into one bf16 device matrix. BF16 checkpoint rows are copied as they are;
// other types are converted on the CPU in chunks.
DeviceBuffer<bf16> uploadStacked(const std::vector<const WeightMatrix*>& parts, cpu::ThreadPool& pool) {
    std::int64_t rows = 0;
    const std::int64_t cols = parts.front()->cols;
    for (const auto* p : parts) rows += p->rows;
    DeviceBuffer<bf16> out(static_cast<std::size_t>(rows * cols));
    bf16* dst = out.get();
    constexpr std::int64_t kChunkElements = 16 << 20;
    std::vector<std::uint16_t> staging;
    for (const auto* p : parts) {
        if (p->dtype == io::DType::BF16) {
            const std::byte* src = p->data + static_cast<std::size_t>(p->firstRow * cols) * 2;
            TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<std::size_t>(p->rows * cols) * 2, cudaMemcpyHostToDevice));
            dst += p->rows * cols;
            continue;
        }
        const std::int64_t chunkRows = std::max<std::int64_t>(1, kChunkElements / cols);
        for (std::int64_t r0 = 0; r0 < p->rows; r0 += chunkRows) {
            const std::int64_t n = std::min(chunkRows, p->rows - r0);
            staging.resize(static_cast<std::size_t>(n * cols));
            pool.parallelFor(static_cast<std::size_t>(n), 1, [&](std::size_t b, std::size_t e) {
                std::vector<float> row(static_cast<std::size_t>(cols));
                for (std::size_t r = b; r < e; ++r) {
                    p->dequantRow(r0 + static_cast<std::int64_t>(r), row.data());
                    for (std::int64_t c = 0; c < cols; ++c) staging[r * cols + c] = io::floatToBf16(row[c]);
                }
            });
            TANDEM_CUDA_CHECK(cudaMemcpy(dst, staging.data(), staging.size() * 2, cudaMemcpyHostToDevice));
            dst += n * cols;
        }
    }
    return out;
}

DeviceBuffer<bf16> upload(const WeightMatrix& m, cpu::ThreadPool& pool) { return uploadStacked({&m}, pool); }

DeviceBuffer<float> uploadF32(const std::vector<float>& v) {
    DeviceBuffer<float> out(v.size());
    TANDEM_CUDA_CHECK(cudaMemcpy(out.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
    return out;
}

DeviceBuffer<float> uploadF32(const WeightMatrix& m) {
    std::vector<float> all(static_cast<std::size_t>(m.rows * m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r) m.dequantRow(r, &all[static_cast<std::size_t>(r * m.cols)]);
    return uploadF32(all);
}

GpuMlp uploadMlp(const model::MlpWeights& w, cpu::ThreadPool& pool) {
    GpuMlp m;
    m.gateUp = uploadStacked({&w.gate, &w.up}, pool);
    m.down = upload(w.down, pool);
    m.inner = static_cast<int>(w.gate.rows);
    return m;
}

}  // namespace

std::uint64_t gpuWeightBytes(const model::ModelConfig& c) {
    const std::int64_t H = c.hiddenSize;
    std::uint64_t bf16Elements = rowsTimesCols({{c.vocabSize, H}});
    if (!c.tieWordEmbeddings) bf16Elements += rowsTimesCols({{c.vocabSize, H}});
    std::uint64_t f32Elements = static_cast<std::uint64_t>(H) * (1 + 2 * c.numLayers);
    for (int l = 0; l < c.numLayers; ++l) {
        if (c.attention == model::AttentionKind::Mla) {
            const std::int64_t qHead = c.qkNopeHeadDim + c.qkRopeHeadDim;
            const std::int64_t kvaRows = c.kvLoraRank + c.qkRopeHeadDim;
            bf16Elements += c.qLoraRank > 0 ? rowsTimesCols({{c.qLoraRank + kvaRows, H}, {c.numHeads * qHead, c.qLoraRank}})
                                            : rowsTimesCols({{kvaRows, H}, {c.numHeads * qHead, H}});
            bf16Elements += rowsTimesCols({{c.numHeads * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank},
                                           {H, c.numHeads * c.vHeadDim}});
        } else {
            bf16Elements += rowsTimesCols({{(c.numHeads + 2 * c.numKvHeads) * c.headDim, H}, {H, c.numHeads * c.headDim}});
        }
        if (c.isMoeLayer(l)) {
            f32Elements += static_cast<std::uint64_t>(c.numExperts) * (H + 1);
            bf16Elements += 3ull * H * c.moeIntermediateSize * c.numSharedExperts;
        } else {
            bf16Elements += 3ull * H * c.intermediateSize;
        }
    }
    return bf16Elements * 2 + f32Elements * 4;
}

GpuWeights uploadWeights(const model::ModelConfig& c, const model::ModelWeights& w, const std::vector<float>& ropeInvFreq,
                         cpu::ThreadPool& pool) {
    GpuWeights g;
    g.embed = upload(w.embed, pool);
    if (!c.tieWordEmbeddings) g.lmHead = upload(w.lmHead, pool);
    g.finalNorm = uploadF32(w.finalNorm);
    g.ropeInvFreq = uploadF32(ropeInvFreq);
    g.layers.resize(w.layers.size());
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
        const model::LayerWeights& src = w.layers[l];
        GpuLayer& dst = g.layers[l];
        dst.inputNorm = uploadF32(src.inputNorm);
        dst.postAttentionNorm = uploadF32(src.postAttentionNorm);
        if (c.attention == model::AttentionKind::Mla) {
            const model::MlaWeights& m = src.mla;
            if (m.qA) {
                dst.qaKva = uploadStacked({&*m.qA, &m.kvA}, pool);
                dst.qaNorm = uploadF32(m.qANorm);
            } else {
                dst.kva = upload(m.kvA, pool);
            }
            dst.q = upload(m.q, pool);
            dst.kvaNorm = uploadF32(m.kvANorm);
            dst.kvb = upload(m.kvB, pool);
            dst.o = upload(m.o, pool);
        } else {
            const model::GqaWeights& a = src.gqa;
            dst.qkv = uploadStacked({&a.q, &a.k, &a.v}, pool);
            dst.o = upload(a.o, pool);
            if (c.qkNorm) {
                dst.qNorm = uploadF32(a.qNorm);
                dst.kNorm = uploadF32(a.kNorm);
            }
        }
        if (src.moe) {
            dst.router = uploadF32(src.moe->router);
            if (!src.moe->correctionBias.empty()) dst.correctionBias = uploadF32(src.moe->correctionBias);
            if (src.moe->shared) dst.shared = uploadMlp(*src.moe->shared, pool);
        } else {
            dst.dense = uploadMlp(*src.dense, pool);
        }
    }
    return g;
}

}  // namespace tandem::cuda
