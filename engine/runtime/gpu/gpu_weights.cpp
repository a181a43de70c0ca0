#include "runtime/gpu/gpu_weights.h"

#include <algorithm>
#include <cstring>

#include "io/dtype.h"
#include "tandem/tuning.h"

namespace tandem::cuda {

namespace {

using model::WeightMatrix;
using Parts = std::vector<const WeightMatrix*>;

// Whether `parts` stay FP8 on the GPU: all FP8 with the same column blocks, which the kernels read 16
// weights at a time (fp8.cu), and Tuning::gpuFp8 on (the default since it was measured: docs/FIDELITY.md;
// TANDEM_GPU_FP8=0 rounds FP8 x scale to bf16 as before).
bool keepsFp8(const Parts& parts) {
    if (!tuning().gpuFp8) return false;
    for (const auto* p : parts)
        if (p->dtype != io::DType::F8_E4M3 || p->blockCols != parts.front()->blockCols || p->blockCols % 16 != 0 ||
            p->cols % 16 != 0)
            return false;
    return true;
}

// Whether `parts` stay int8 (dense weights quantized at load, a scale per row): all int8, which the
// kernels read 16 weights at a time.
bool keepsInt8(const Parts& parts) {
    for (const auto* p : parts)
        if (p->dtype != io::DType::I8 || !p->rowScales || p->cols % 16 != 0) return false;
    return true;
}

bool keepsEightBit(const Parts& parts) { return keepsFp8(parts) || keepsInt8(parts); }

std::int64_t rowsOf(const Parts& parts) {
    std::int64_t rows = 0;
    for (const auto* p : parts) rows += p->rows;
    return rows;
}

std::uint64_t stackedBytes(const Parts& parts) {
    const auto rows = static_cast<std::uint64_t>(rowsOf(parts)), cols = static_cast<std::uint64_t>(parts.front()->cols);
    if (keepsInt8(parts)) return rows * cols + rows * 4;
    if (!keepsFp8(parts)) return rows * cols * 2;
    const auto blockCols = static_cast<std::uint64_t>(parts.front()->blockCols);
    return rows * cols + rows * ((cols + blockCols - 1) / blockCols) * 4;
}

// Converts the rows of `p` to float32 in chunks of about 16 M values on all cores and hands each chunk
// to put(values, rows).
template <class Put>
void convertInChunks(const WeightMatrix& p, cpu::ThreadPool& pool, Put put) {
    constexpr std::int64_t kChunkElements = 16 << 20;
    const std::int64_t cols = p.cols;
    const std::int64_t chunkRows = std::max<std::int64_t>(1, kChunkElements / cols);
    std::vector<float> values;
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += chunkRows) {
        const std::int64_t n = std::min(chunkRows, p.rows - r0);
        values.resize(static_cast<std::size_t>(n * cols));
        pool.parallelFor(static_cast<std::size_t>(n), 1, [&](std::size_t b, std::size_t e) {
            for (std::size_t r = b; r < e; ++r)
                p.dequantRow(r0 + static_cast<std::int64_t>(r), &values[r * static_cast<std::size_t>(cols)]);
        });
        put(values, n);
    }
}

// FP8 parts: their bytes as they are, and each row's block scales.
GpuMatrix uploadFp8(const Parts& parts) {
    GpuMatrix m;
    m.rows = static_cast<int>(rowsOf(parts));
    m.cols = static_cast<int>(parts.front()->cols);
    m.blockCols = parts.front()->blockCols;
    m.scaleCols = (m.cols + m.blockCols - 1) / m.blockCols;
    m.eight = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols));
    std::vector<float> scales(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.scaleCols));
    std::uint8_t* dst = m.eight.get();
    std::size_t row = 0;
    for (const auto* p : parts) {
        const std::size_t bytes = static_cast<std::size_t>(p->rows * p->cols);
        const std::byte* src = p->data + static_cast<std::size_t>(p->firstRow * p->cols);
        TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
        dst += bytes;
        for (std::int64_t r = 0; r < p->rows; ++r, ++row) {
            const float* blockRow = p->blockScales + ((p->firstRow + r) / p->blockRows) * p->scaleCols;
            std::copy_n(blockRow, m.scaleCols, &scales[row * static_cast<std::size_t>(m.scaleCols)]);
        }
    }
    m.scales = DeviceBuffer<float>(scales.size());
    TANDEM_CUDA_CHECK(cudaMemcpy(m.scales.get(), scales.data(), scales.size() * 4, cudaMemcpyHostToDevice));
    return m;
}

// Int8 parts: their bytes and row scales as they are.
GpuMatrix uploadInt8(const Parts& parts) {
    GpuMatrix m;
    m.format = Weight8::Int8;
    m.rows = static_cast<int>(rowsOf(parts));
    m.cols = static_cast<int>(parts.front()->cols);
    m.blockCols = m.cols;
    m.scaleCols = 1;
    m.eight = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols));
    m.scales = DeviceBuffer<float>(static_cast<std::size_t>(m.rows));
    std::size_t row = 0;
    for (const auto* p : parts) {
        const auto rows = static_cast<std::size_t>(p->rows), cols = static_cast<std::size_t>(p->cols);
        const auto first = static_cast<std::size_t>(p->firstRow);
        TANDEM_CUDA_CHECK(cudaMemcpy(m.eight.get() + row * cols, p->data + first * cols, rows * cols, cudaMemcpyHostToDevice));
        TANDEM_CUDA_CHECK(cudaMemcpy(m.scales.get() + row, p->rowScales + first, rows * 4, cudaMemcpyHostToDevice));
        row += rows;
    }
    return m;
}

// Stacks the rows of `parts` into one device matrix: FP8 stays FP8 (keepsFp8), int8 stays int8
// (keepsInt8), BF16 rows are copied as they are, other types are converted to bf16 on the CPU.
GpuMatrix uploadStacked(const Parts& parts, cpu::ThreadPool& pool) {
    if (keepsFp8(parts)) return uploadFp8(parts);
    if (keepsInt8(parts)) return uploadInt8(parts);
    GpuMatrix m;
    m.rows = static_cast<int>(rowsOf(parts));
    m.cols = static_cast<int>(parts.front()->cols);
    const std::int64_t cols = m.cols;
    m.values = DeviceBuffer<bf16>(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols));
    bf16* dst = m.values.get();
    std::vector<std::uint16_t> staging;
    for (const auto* p : parts) {
        if (p->dtype == io::DType::BF16) {
            const std::byte* src = p->data + static_cast<std::size_t>(p->firstRow * cols) * 2;
            TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<std::size_t>(p->rows * cols) * 2, cudaMemcpyHostToDevice));
            dst += p->rows * cols;
            continue;
        }
        convertInChunks(*p, pool, [&](const std::vector<float>& values, std::int64_t n) {
            staging.resize(values.size());
            for (std::size_t i = 0; i < values.size(); ++i) staging[i] = io::floatToBf16(values[i]);
            TANDEM_CUDA_CHECK(cudaMemcpy(dst, staging.data(), staging.size() * 2, cudaMemcpyHostToDevice));
            dst += n * cols;
        });
    }
    return m;
}

GpuMatrix upload(const WeightMatrix& m, cpu::ThreadPool& pool) { return uploadStacked({&m}, pool); }

// A matrix as bf16 (hi) plus, for FP8 when `lo` is given, the bf16 of what that rounding lost (FP8
// values times their scales do not fit bf16): hi + lo is the float32 value to about 16 bits.
void uploadSplit(const WeightMatrix& p, cpu::ThreadPool& pool, DeviceBuffer<bf16>& hi, DeviceBuffer<bf16>* lo) {
    hi = DeviceBuffer<bf16>(static_cast<std::size_t>(p.rows * p.cols));
    if (p.dtype == io::DType::BF16) {
        const std::byte* src = p.data + static_cast<std::size_t>(p.firstRow * p.cols) * 2;
        TANDEM_CUDA_CHECK(cudaMemcpy(hi.get(), src, hi.size() * 2, cudaMemcpyHostToDevice));
        return;
    }
    const bool withLo = lo && p.dtype == io::DType::F8_E4M3;
    if (withLo) *lo = DeviceBuffer<bf16>(hi.size());
    std::vector<std::uint16_t> hiValues, loValues;
    std::size_t done = 0;
    convertInChunks(p, pool, [&](const std::vector<float>& values, std::int64_t) {
        hiValues.resize(values.size());
        loValues.resize(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
            hiValues[i] = io::floatToBf16(values[i]);
            loValues[i] = io::floatToBf16(values[i] - io::bf16ToFloat(hiValues[i]));
        }
        TANDEM_CUDA_CHECK(cudaMemcpy(hi.get() + done, hiValues.data(), values.size() * 2, cudaMemcpyHostToDevice));
        if (withLo)
            TANDEM_CUDA_CHECK(cudaMemcpy(lo->get() + done, loValues.data(), values.size() * 2, cudaMemcpyHostToDevice));
        done += values.size();
    });
}

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

// The projections of a layer, each the parts that one device matrix stacks, in the order GpuLayer
// holds them: what gpuWeightBytes counts and uploadWeights uploads.
struct LayerParts {
    Parts qkv, qaKva, q, kva, o, gateUp, down;
};

LayerParts layerParts(const model::ModelConfig& c, const model::LayerWeights& w) {
    LayerParts p;
    if (c.attention == model::AttentionKind::Mla) {
        const model::MlaWeights& m = w.mla;
        // q_a and kv_a are one matrix when both stay FP8 or both become bf16; a checkpoint with only one
        // of them FP8 keeps them apart, so the FP8 one is not rounded to bf16 for the other's sake.
        if (m.qA && keepsFp8({&*m.qA}) == keepsFp8({&m.kvA}) && keepsInt8({&*m.qA}) == keepsInt8({&m.kvA})) {
            p.qaKva = {&*m.qA, &m.kvA};
        } else {
            if (m.qA) p.qaKva = {&*m.qA};
            p.kva = {&m.kvA};
        }
        p.q = {&m.q};
        p.o = {&m.o};
    } else {
        p.qkv = {&w.gqa.q, &w.gqa.k, &w.gqa.v};
        p.o = {&w.gqa.o};
    }
    const model::MlpWeights* mlp = w.moe ? (w.moe->shared ? &*w.moe->shared : nullptr) : &*w.dense;
    if (mlp) {
        p.gateUp = {&mlp->gate, &mlp->up};
        p.down = {&mlp->down};
    }
    return p;
}

GpuMatrix uploadIf(const Parts& parts, cpu::ThreadPool& pool) { return parts.empty() ? GpuMatrix{} : uploadStacked(parts, pool); }

}  // namespace

std::uint64_t gpuWeightBytes(const model::ModelConfig& c, const model::ModelWeights& w) {
    const auto H = static_cast<std::uint64_t>(c.hiddenSize);
    std::uint64_t bytes = static_cast<std::uint64_t>(c.vocabSize) * H * 2;  // the embeddings, as bf16
    if (!c.tieWordEmbeddings) bytes += stackedBytes({&w.lmHead});
    bytes += H * (1 + 2 * w.layers.size()) * 4;  // the norms
    for (const model::LayerWeights& layer : w.layers) {
        const LayerParts p = layerParts(c, layer);
        for (const Parts* parts : {&p.qkv, &p.qaKva, &p.q, &p.kva, &p.o, &p.gateUp, &p.down})
            if (!parts->empty()) bytes += stackedBytes(*parts);
        if (c.attention == model::AttentionKind::Mla) {
            const WeightMatrix& kvb = layer.mla.kvB;
            const bool split = kvb.dtype == io::DType::F8_E4M3 && tuning().gpuFp8;
            bytes += static_cast<std::uint64_t>(kvb.rows * kvb.cols) * (split ? 4 : 2);
        }
        if (layer.moe) {
            bytes += static_cast<std::uint64_t>(c.numExperts) * (H + 1) * 4;
            const model::MoeWeights& m = *layer.moe;
            bytes += (m.routerBias.size() + m.gateBias.size() + m.upBias.size() + m.downBias.size()) * 4;
        }
        bytes += (layer.gqa.oBias.size() + layer.gqa.sinks.size() + layer.gqa.qBias.size() + layer.gqa.kBias.size() +
                  layer.gqa.vBias.size()) * 4;
    }
    return bytes;
}

bool hasEightBitWeights(const model::ModelConfig& c, const model::ModelWeights& w) {
    if (!c.tieWordEmbeddings && keepsEightBit({&w.lmHead})) return true;
    for (const model::LayerWeights& layer : w.layers) {
        const LayerParts p = layerParts(c, layer);
        for (const Parts* parts : {&p.qkv, &p.qaKva, &p.q, &p.kva, &p.o, &p.gateUp, &p.down})
            if (!parts->empty() && keepsEightBit(*parts)) return true;
    }
    return false;
}

GpuWeights uploadWeights(const model::ModelConfig& c, const model::ModelWeights& w, const std::vector<float>& ropeInvFreq,
                         cpu::ThreadPool& pool, WeightRange range) {
    GpuWeights g;
    const int end = range.endLayer < 0 ? static_cast<int>(w.layers.size()) : range.endLayer;
    const bool embeds = range.firstLayer == 0, heads = end == static_cast<int>(w.layers.size());
    if (embeds || (heads && c.tieWordEmbeddings)) uploadSplit(w.embed, pool, g.embed, nullptr);  // launchEmbed reads bf16
    if (heads && !c.tieWordEmbeddings) g.lmHead = upload(w.lmHead, pool);
    if (heads) g.finalNorm = uploadF32(w.finalNorm);
    g.ropeInvFreq = uploadF32(ropeInvFreq);
    g.layers.resize(w.layers.size());
    const auto note = [&](const GpuMatrix& m) {
        if (!m.isEightBit()) return;
        g.hasEightBit = true;
        g.largestEightBitCols = std::max(g.largestEightBitCols, m.cols);
    };
    note(g.lmHead);
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
        if (static_cast<int>(l) < range.firstLayer || static_cast<int>(l) >= end) continue;
        const model::LayerWeights& src = w.layers[l];
        GpuLayer& dst = g.layers[l];
        const LayerParts p = layerParts(c, src);
        dst.inputNorm = uploadF32(src.inputNorm);
        dst.postAttentionNorm = uploadF32(src.postAttentionNorm);
        dst.qkv = uploadIf(p.qkv, pool);
        dst.qaKva = uploadIf(p.qaKva, pool);
        dst.q = uploadIf(p.q, pool);
        dst.kva = uploadIf(p.kva, pool);
        dst.o = uploadIf(p.o, pool);
        if (c.attention == model::AttentionKind::Mla) {
            const model::MlaWeights& m = src.mla;
            if (m.qA) dst.qaNorm = uploadF32(m.qANorm);
            dst.kvaNorm = uploadF32(m.kvANorm);
            uploadSplit(m.kvB, pool, dst.kvb, tuning().gpuFp8 ? &dst.kvbLo : nullptr);
        } else {
            if (c.qkNorm) {
                dst.qNorm = uploadF32(src.gqa.qNorm);
                dst.kNorm = uploadF32(src.gqa.kNorm);
            }
            if (c.attentionBias) {
                std::vector<float> bias(src.gqa.qBias);
                bias.insert(bias.end(), src.gqa.kBias.begin(), src.gqa.kBias.end());
                bias.insert(bias.end(), src.gqa.vBias.begin(), src.gqa.vBias.end());
                dst.qkvBias = uploadF32(bias);
            }
            if (!src.gqa.oBias.empty()) dst.oBias = uploadF32(src.gqa.oBias);
            if (!src.gqa.sinks.empty()) dst.sinks = uploadF32(src.gqa.sinks);
        }
        if (!p.gateUp.empty()) {
            GpuMlp mlp;
            mlp.gateUp = uploadStacked(p.gateUp, pool);
            mlp.down = uploadStacked(p.down, pool);
            mlp.inner = static_cast<int>(p.gateUp.front()->rows);
            (src.moe ? dst.shared : dst.dense) = std::move(mlp);
        }
        if (src.moe) {
            dst.router = uploadF32(src.moe->router);
            if (!src.moe->correctionBias.empty()) dst.correctionBias = uploadF32(src.moe->correctionBias);
            if (!src.moe->routerBias.empty()) dst.routerBias = uploadF32(src.moe->routerBias);
            if (!src.moe->gateBias.empty()) dst.expertGateBias = uploadF32(src.moe->gateBias);
            if (!src.moe->upBias.empty()) dst.expertUpBias = uploadF32(src.moe->upBias);
            if (!src.moe->downBias.empty()) dst.expertDownBias = uploadF32(src.moe->downBias);
        }
        for (const GpuMatrix* m : {&dst.qkv, &dst.qaKva, &dst.q, &dst.kva, &dst.o}) note(*m);
        for (const auto* mlp : {&dst.dense, &dst.shared})
            if (*mlp) {
                note((*mlp)->gateUp);
                note((*mlp)->down);
            }
    }
    return g;
}

}  // namespace tandem::cuda
