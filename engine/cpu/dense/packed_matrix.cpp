#include "cpu/dense/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/expert_pack.h"
#include "cpu/kernels/activation_quant.h"
#include "cpu/kernels/expert_kernels.h"
#include "tandem/error.h"

namespace tandem::cpu {

PackedMatrix::PackedMatrix(ExpertType type, const WeightMatrix& m, ThreadPool& pool) {
    if (type == ExpertType::BF16) throw Error("a packed dense matrix is int8 or int4");
    layout_ = ExpertLayout::make(type, static_cast<int>(m.rows), static_cast<int>(m.cols));
    bytes_ = layout_.dataBytes - layout_.downOffset;
    const std::size_t allocated = (bytes_ + 63) / 64 * 64;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, allocated)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, allocated);
    const RowReader rows = [&m](std::int64_t r, float* out) { m.dequantRow(r, out); };
    pool.parallelFor(static_cast<std::size_t>(layout_.downPanels), 8, [&](std::size_t q0, std::size_t q1) {
        packDownPanels(layout_, rows, data_.get(), static_cast<int>(q0), static_cast<int>(q1));
    });
}

const float* PackedMatrix::rowScales() const {
    if (layout_.type != ExpertType::INT8) return nullptr;
    return reinterpret_cast<const float*>(data_.get() + (layout_.downScalesOffset - layout_.downOffset));
}

void PackedMatrix::dequantRow(std::int64_t r, float* out) const { unpackDownRow(layout_, data_.get(), static_cast<int>(r), out); }

void PackedMatrix::multiply(const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy,
                            ThreadPool& pool) const {
    const ExpertLayout& l = layout_;
    const ExpertKernels& kernels = kernelsFor(selectedIsa());
    // The activations as the int8/int4 kernels take them: int8 over the padded columns, a scale per
    // token and the sums of every 32 columns; rows an odd number of cache lines apart.
    std::size_t stride = (static_cast<std::size_t>(l.interPad) + 63) / 64 * 64;
    if ((stride / 64) % 2 == 0) stride += 64;
    const int groups = l.interPad / kActGroup;
    struct Scratch {
        std::unique_ptr<std::byte, void (*)(void*)> q{nullptr, std::free};
        std::size_t capacity = 0;
        std::vector<float> scales, ones;
        std::vector<std::int32_t> sums;
        std::vector<float*> dest;
    };
    thread_local Scratch s;
    if (s.capacity < tokens * stride) {
        s.q.reset(static_cast<std::byte*>(std::aligned_alloc(64, tokens * stride)));
        if (!s.q) throw std::bad_alloc();
        s.capacity = tokens * stride;
    }
    s.scales.resize(tokens);
    s.ones.assign(tokens, 1.0f);
    s.sums.resize(tokens * static_cast<std::size_t>(groups));
    s.dest.resize(tokens);
    for (std::size_t t = 0; t < tokens; ++t) {
        activationToInt8(x + t * ldx, l.inter, l.interPad, reinterpret_cast<std::int8_t*>(s.q.get() + t * stride), &s.scales[t],
                         s.sums.data() + t * static_cast<std::size_t>(groups));
        s.dest[t] = y + t * ldy;
        std::fill(y + t * ldy, y + t * ldy + l.hidden, 0.0f);  // the kernels add into it
    }
    const bool gemm = static_cast<int>(tokens) >= kernels.gemmMinRows[static_cast<int>(l.type)];
    const DownKernel kernel = kernels.pick(l.type, gemm).down;
    // Panels of 16 rows to each thread; enough of them a piece that the kernel's set-up is amortized.
    const std::size_t grain = std::max<std::size_t>(1, 64 / std::max<std::size_t>(1, tokens));
    const Scratch& in = s;  // the caller's scratch, read by every thread
    pool.parallelFor(static_cast<std::size_t>(l.downPanels), grain, [&](std::size_t q0, std::size_t q1) {
        DownCall call;
        call.layout = &l;
        call.chunks = chunks();
        call.firstChunk = 0;
        call.chunkCount = l.chunks;
        call.firstPanel = static_cast<int>(q0);
        call.panelCount = static_cast<int>(q1 - q0);
        call.rowScales = rowScales();
        call.act = {in.q.get(), stride, 0, in.scales.data(), in.sums.data(), static_cast<std::size_t>(groups), static_cast<int>(tokens)};
        call.dest = in.dest.data();
        call.weight = in.ones.data();
        kernel(call);
    });
}

}  // namespace tandem::cpu
