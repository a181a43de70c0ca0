#include "convert/convert_dense.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "cpu/dense/quantize_dense.h"
#include "tandem/error.h"

namespace tandem::convert {

namespace {

// Row r of a product as float32: through the writer's own tensor when it is made while written (a
// GGUF's dequantized or re-ordered rows, in Hugging Face's order), else through the matrix view, which
// knows FP8's block scales.
class RowSource {
public:
    RowSource(const io::TensorSource& t, const cpu::WeightMatrix& m) : tensor_(t), matrix_(m) {
        if (tensor_.produce) bytes_.resize(static_cast<std::size_t>(io::dtypeRowBytes(tensor_.dtype, m.cols)));
    }
    std::int64_t rows() const { return matrix_.rows; }
    std::int64_t cols() const { return matrix_.cols; }

    void read(std::int64_t r, float* out) {
        if (!tensor_.produce) {
            matrix_.dequantRow(r, out);
        } else {
            tensor_.produce(static_cast<std::uint64_t>(r) * bytes_.size(), {bytes_.data(), bytes_.size()});
            const std::size_t size = io::dtypeSize(tensor_.dtype);
            for (std::int64_t c = 0; c < matrix_.cols; ++c) out[c] = io::loadAsFloat(tensor_.dtype, bytes_.data() + c * size);
        }
        for (std::int64_t c = 0; c < matrix_.cols; ++c)
            if (!std::isfinite(out[c]))
                throw Error(tensor_.name + " holds " + (std::isnan(out[c]) ? "NaN" : "an infinite value") + " (row " +
                            std::to_string(r) + "); the input is damaged");
    }

private:
    io::TensorSource tensor_;
    cpu::WeightMatrix matrix_;
    std::vector<std::byte> bytes_;
};

// A tensor of `rows` rows of rowBytes each, made by make(row, dst) into the writer's pieces, which may
// cut a row anywhere.
io::TensorSource producedRows(std::string name, io::DType dtype, std::vector<std::int64_t> shape, std::int64_t rows,
                              std::size_t rowBytes, std::function<void(std::int64_t, std::byte*)> make) {
    io::TensorSource out{std::move(name), dtype, std::move(shape), {}, {}, 0};
    out.producedBytes = static_cast<std::uint64_t>(rows) * rowBytes;
    auto scratch = std::make_shared<std::vector<std::byte>>(rowBytes);
    out.produce = [=](std::uint64_t offset, std::span<std::byte> bytes) {
        for (std::size_t done = 0; done < bytes.size();) {
            const std::uint64_t at = offset + done;
            const auto r = static_cast<std::int64_t>(at / rowBytes);
            const std::size_t within = static_cast<std::size_t>(at % rowBytes);
            const std::size_t n = std::min(rowBytes - within, bytes.size() - done);
            if (within == 0 && n == rowBytes) {
                make(r, bytes.data() + done);
            } else {
                make(r, scratch->data());
                std::memcpy(bytes.data() + done, scratch->data() + within, n);
            }
            done += n;
        }
    };
    return out;
}

// One product as int8 values and row scales. Both tensors quantize a row the same way; the scales'
// tensor reads its rows again (a second pass over the product, where keeping every row's values would
// hold the whole matrix).
void addInt8(const io::TensorSource& t, const cpu::WeightMatrix& m, std::vector<io::TensorSource>& out) {
    const auto cols = static_cast<std::size_t>(m.cols);
    auto values = std::make_shared<RowSource>(t, m);
    auto floats = std::make_shared<std::vector<float>>(cols);
    out.push_back(producedRows(t.name, io::DType::I8, {m.rows, m.cols}, m.rows, cols, [=](std::int64_t r, std::byte* dst) {
        values->read(r, floats->data());
        cpu::quantizeRowInt8(floats->data(), cols, reinterpret_cast<std::int8_t*>(dst));
    }));
    auto scales = std::make_shared<RowSource>(t, m);
    auto scaleFloats = std::make_shared<std::vector<float>>(cols);
    auto ignored = std::make_shared<std::vector<std::int8_t>>(cols);
    out.push_back(producedRows(t.name + model::kRowScaleSuffix, io::DType::F32, {m.rows}, m.rows, sizeof(float),
                               [=](std::int64_t r, std::byte* dst) {
                                   scales->read(r, scaleFloats->data());
                                   const float s = cpu::quantizeRowInt8(scaleFloats->data(), cols, ignored->data());
                                   std::memcpy(dst, &s, sizeof s);
                               }));
}

void addBf16(const io::TensorSource& t, const cpu::WeightMatrix& m, std::vector<io::TensorSource>& out) {
    if (t.dtype == io::DType::BF16) {  // already so (a GGUF's quantized products are made as bf16)
        out.push_back(t);
        return;
    }
    const auto cols = static_cast<std::size_t>(m.cols);
    auto rows = std::make_shared<RowSource>(t, m);
    auto floats = std::make_shared<std::vector<float>>(cols);
    out.push_back(producedRows(t.name, io::DType::BF16, {m.rows, m.cols}, m.rows, 2 * cols, [=](std::int64_t r, std::byte* dst) {
        rows->read(r, floats->data());
        for (std::size_t c = 0; c < cols; ++c) {
            const std::uint16_t b = io::floatToBf16((*floats)[c]);
            std::memcpy(dst + 2 * c, &b, 2);
        }
    }));
}

}  // namespace

void storeDenseAs(ConversionPlan& plan, const std::string& dense) {
    if (dense != "checkpoint" && dense != "int8" && dense != "bf16")
        throw Error("--dense must be checkpoint, int8 or bf16, not '" + dense + "'");
    plan.denseType = dense;
    if (dense == "checkpoint") return;
    std::map<std::string, cpu::WeightMatrix> products;
    model::forEachDenseProduct(plan.weights, plan.config, [&](const std::string& name, cpu::WeightMatrix& m) {
        if (!name.empty()) products.emplace(name, m);
    });
    std::set<std::string> foldedScales;
    for (const auto& [name, m] : products)
        if (m.dtype == io::DType::F8_E4M3) foldedScales.insert(name + "_scale_inv");
    std::vector<io::TensorSource> out;
    out.reserve(plan.denseTensors.size() + products.size());
    for (const io::TensorSource& t : plan.denseTensors) {
        if (foldedScales.count(t.name)) continue;
        const auto it = products.find(t.name);
        if (it == products.end()) out.push_back(t);
        else if (dense == "int8") addInt8(t, it->second, out);
        else addBf16(t, it->second, out);
    }
    plan.denseTensors = std::move(out);
}

}  // namespace tandem::convert
