// compressed-tensors int4 experts (Kimi-K2-Thinking's release format, io/compressed_tensors.h): the
// quantization_config read or refused by name, the three tensors of a packed weight checked, and the
// experts repacked into Tandem's INT4 bit for bit, at load and by convert.
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "convert/convert_model.h"
#include "cpu/expert_pack.h"
#include "cpu/half_float.h"
#include "cpu/int4_repack.h"
#include "expect_error.h"
#include "io/checkpoint.h"
#include "io/compressed_tensors.h"
#include "io/packed_store.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/weights.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

const QString kFixture = QStringLiteral("tiny-kimi-k2-int4");

std::string fixtureConfig() { return io::readRegularFile(fixturePath(kFixture).toStdString() + "/config.json"); }

// The fixture's tensors, some hidden and some replaced: one damaged checkpoint per test.
class EditedTensors : public io::TensorLookup {
public:
    explicit EditedTensors(const io::TensorLookup& base) : base_(base) {}
    bool has(const std::string& name) const override {
        return replaced_.count(name) || (!hidden_.count(name) && base_.has(name));
    }
    io::TensorView view(const std::string& name) const override {
        if (const auto it = replaced_.find(name); it != replaced_.end()) return it->second;
        if (hidden_.count(name)) return base_.view(name + " (hidden)");
        return base_.view(name);
    }
    std::string describe() const override { return base_.describe(); }

    void hide(const std::string& name) { hidden_.insert(name); }
    void replace(const std::string& name, io::TensorView v) {
        v.source = "tensor '" + name + "' (edited)";
        replaced_[name] = std::move(v);
    }

private:
    const io::TensorLookup& base_;
    std::set<std::string> hidden_;
    std::map<std::string, io::TensorView> replaced_;
};

const std::string kExpert = "model.layers.1.mlp.experts.2.down_proj.weight";

// Random int4 matrices in memory, with every group holding a +7 and no -8: then the float path's
// requantization (absmax / 7 as the scale) gives back the very nibbles and scales, so its bytes are the
// repacker's too.
struct Int4Matrix {
    std::vector<std::uint8_t> packed;
    std::vector<std::uint16_t> scales;
    cpu::WeightMatrix m;

    Int4Matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng) : packed(rows * cols / 2), scales(rows * cols / 32) {
        std::uniform_int_distribution<int> q(-7, 7), position(0, 31), exponent(-10, 4), mantissa(0, 127);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t g = 0; g < cols / 32; ++g) {
                const int seven = position(rng);
                for (int i = 0; i < 32; ++i) {
                    const std::int64_t k = g * 32 + i;
                    const int v = (i == seven ? 7 : q(rng)) + 8;
                    auto& b = packed[static_cast<std::size_t>((r * cols + k) / 2)];
                    b = static_cast<std::uint8_t>(k % 2 ? (b & 0x0f) | (v << 4) : (b & 0xf0) | v);
                }
                const float s = std::ldexp(1.0f + mantissa(rng) / 128.0f, exponent(rng));
                scales[static_cast<std::size_t>(r * (cols / 32) + g)] = io::floatToBf16(s);
            }
        m.dtype = io::DType::I4;
        m.rows = rows;
        m.cols = cols;
        m.data = reinterpret_cast<const std::byte*>(packed.data());
        m.int4Scales = scales.data();
    }
};

// Every row of every matrix of a packed INT4 expert equals the checkpoint's q * scale, bit for bit.
void expectSameValues(const io::ExpertLayout& l, const std::byte* packed, const model::MlpWeights& e, const QString& what) {
    std::vector<float> want(static_cast<std::size_t>(std::max(l.hidden, l.inter))), got(want.size());
    const std::pair<cpu::ExpertMatrix, const cpu::WeightMatrix*> matrices[] = {
        {cpu::ExpertMatrix::Gate, &e.gate}, {cpu::ExpertMatrix::Up, &e.up}, {cpu::ExpertMatrix::Down, &e.down}};
    for (const auto& [which, m] : matrices)
        for (std::int64_t r = 0; r < m->rows; ++r) {
            m->dequantRow(r, want.data());
            cpu::unpackExpertRow(l, packed, which, static_cast<int>(r), got.data());
            QVERIFY2(std::memcmp(want.data(), got.data(), static_cast<std::size_t>(m->cols) * sizeof(float)) == 0,
                     qPrintable(what + QString(": matrix %1 row %2 differs").arg(static_cast<int>(which)).arg(r)));
        }
}

struct AlignedBuffer {
    explicit AlignedBuffer(std::size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(4096, n))) {}
    ~AlignedBuffer() { std::free(p); }
    std::byte* p;
};

}  // namespace

class CompressedTensorsTest : public QObject {
    Q_OBJECT

private slots:
    void readsTheReleaseConfig() {
        const model::ModelConfig c = model::parseModelConfig(fixtureConfig(), "", "config.json");
        QCOMPARE(c.modelType, std::string("kimi_k2"));
        QCOMPARE(c.packedInt4Group, 32);
        QVERIFY(!c.fp8);
        const auto scheme = io::parseCompressedTensors(nlohmann::json::parse(fixtureConfig())["quantization_config"], "q");
        QCOMPARE(scheme.ignore.front(), std::string("lm_head"));
    }

    void refusesOtherSchemesByName_data() {
        QTest::addColumn<QString>("path");   // a JSON pointer into quantization_config
        QTest::addColumn<QString>("value");  // JSON
        QTest::addColumn<QString>("named");  // what the message must say
        const QString w = "/config_groups/group_0/weights/";
        QTest::newRow("8 bits") << w + "num_bits" << "8" << "num_bits 8";
        QTest::newRow("asymmetric") << w + "symmetric" << "false" << "asymmetric";
        QTest::newRow("group 128") << w + "group_size" << "128" << "group_size 128";
        QTest::newRow("per channel") << w + "strategy" << "\"channel\"" << "strategy \"channel\"";
        QTest::newRow("float") << w + "type" << "\"float\"" << "type \"float\"";
        QTest::newRow("actorder") << w + "actorder" << "\"group\"" << "actorder";
        QTest::newRow("int-quantized") << "/format" << "\"int-quantized\"" << "format \"int-quantized\"";
        QTest::newRow("w4a8") << "/config_groups/group_0/input_activations" << R"({"num_bits": 8})" << "input_activations";
        QTest::newRow("kv cache") << "/kv_cache_scheme" << R"({"num_bits": 8})" << "kv_cache_scheme";
        QTest::newRow("no groups") << "/config_groups" << "null" << "config_groups";
        QTest::newRow("ignore") << "/ignore" << "\"lm_head\"" << "'ignore'";
    }
    void refusesOtherSchemesByName() {
        QFETCH(QString, path);
        QFETCH(QString, value);
        QFETCH(QString, named);
        nlohmann::json config = nlohmann::json::parse(fixtureConfig());
        config["quantization_config"][nlohmann::json::json_pointer(path.toStdString())] = nlohmann::json::parse(value.toStdString());
        expectError([&] { model::parseModelConfig(config.dump(), "", "config.json"); },
                    {"config.json quantization_config", named.toUtf8().constData()});
    }

    // bf16 -> fp16 keeps every scale of magnitude 2^-17 to 65280; past fp16's range it is an error.
    void scalesBecomeEqualFp16() {
        int exact = 0;
        for (std::uint32_t b = 0; b < 0x10000; ++b) {
            const auto bits = static_cast<std::uint16_t>(b);
            const float s = io::bf16ToFloat(bits);
            const float magnitude = std::fabs(s);
            if (!std::isfinite(s) || magnitude > 65504.0f) {
                QVERIFY_THROWS_EXCEPTION(Error, cpu::int4ScaleAsF16(bits));
                continue;
            }
            const float back = io::f16ToFloat(cpu::int4ScaleAsF16(bits));
            if (magnitude == 0.0f || magnitude >= std::ldexp(1.0f, -17)) {
                QCOMPARE(back, s);
                ++exact;
            } else {
                QVERIFY(std::fabs(back - s) <= std::ldexp(1.0f, -25));
            }
        }
        QVERIFY(exact > 2 * (15 + 17) * 128);
        expectError([] { cpu::int4ScaleAsF16(io::floatToBf16(65536.0f)); }, {"65504", "bf16 or int8"});
    }

    // Packed from the checkpoint, every expert of the fixture holds exactly its q * scale.
    void packedExpertsEqualTheCheckpoint() {
        const auto config = model::loadModelConfig(fixturePath(kFixture).toStdString());
        const io::Checkpoint ckpt(fixturePath(kFixture).toStdString());
        const auto weights = model::loadWeights(ckpt, config);
        const auto l = io::ExpertLayout::make(io::ExpertType::INT4, config.hiddenSize, config.moeIntermediateSize);
        AlignedBuffer buffer(l.expertBytes);
        int experts = 0;
        for (int layer = 0; layer < config.numLayers; ++layer) {
            if (!config.isMoeLayer(layer)) continue;
            for (const auto& e : weights.layers[static_cast<std::size_t>(layer)].moe->experts) {
                QCOMPARE(e.gate.dtype, io::DType::I4);
                QVERIFY(cpu::repacksInt4Exactly(l, e.gate, e.up, e.down));
                cpu::packCheckpointExpert(l, e.gate, e.up, e.down, buffer.p);
                expectSameValues(l, buffer.p, e, QString("layer %1 expert %2").arg(layer).arg(experts));
                ++experts;
            }
        }
        QCOMPARE(experts, 2 * config.numExperts);
        // Straight from the file: the first value of an expert is its nibble - 8 times its bf16 scale.
        const auto raw = ckpt.get("model.layers.1.mlp.experts.0.gate_proj.weight_packed");
        const auto scale = ckpt.get("model.layers.1.mlp.experts.0.gate_proj.weight_scale");
        std::uint16_t s;
        std::memcpy(&s, scale.data.data(), 2);
        std::vector<float> row(static_cast<std::size_t>(config.hiddenSize));
        const auto& first = weights.layers[1].moe->experts[0];
        cpu::packCheckpointExpert(l, first.gate, first.up, first.down, buffer.p);
        cpu::unpackExpertRow(l, buffer.p, cpu::ExpertMatrix::Gate, 0, row.data());
        QCOMPARE(row[0], static_cast<float>((static_cast<int>(raw.data[0]) & 0xf) - 8) * io::bf16ToFloat(s));
    }

    // At real-model-like shape oddities (a padded group in the hidden dimension, down in a full and a narrow
    // chunk), the repacked bytes are those of the float path wherever that one is exact, padding included.
    void repackedBytesEqualTheFloatPath() {
        std::mt19937 rng(7);
        for (const auto& [hidden, inter] : {std::pair{160, 192}, std::pair{128, 64}, std::pair{96, 320}}) {
            Int4Matrix gate(inter, hidden, rng), up(inter, hidden, rng), down(hidden, inter, rng);
            const auto l = io::ExpertLayout::make(io::ExpertType::INT4, hidden, inter);
            AlignedBuffer repacked(l.expertBytes), floats(l.expertBytes);
            cpu::packCheckpointExpert(l, gate.m, up.m, down.m, repacked.p);
            cpu::packExpert(l, gate.m, up.m, down.m, floats.p);
            QVERIFY2(std::memcmp(repacked.p, floats.p, l.expertBytes) == 0, qPrintable(QString("%1 x %2").arg(hidden).arg(inter)));
            // And bf16/int8 dequantize: the same q * scale reach the float path.
            QVERIFY(!cpu::repacksInt4Exactly(io::ExpertLayout::make(io::ExpertType::BF16, hidden, inter), gate.m, up.m, down.m));
        }
    }

    void refusesDamagedTensors_data() {
        QTest::addColumn<QString>("damage");
        for (const char* d : {"no scale", "no shape", "packed shape", "scale shape", "packed type", "shape says", "dense packed"})
            QTest::newRow(d) << QString(d);
    }
    void refusesDamagedTensors() {
        QFETCH(QString, damage);
        const auto config = model::loadModelConfig(fixturePath(kFixture).toStdString());
        const io::Checkpoint ckpt(fixturePath(kFixture).toStdString());
        EditedTensors t(ckpt);
        const io::TensorView packed = ckpt.view(kExpert + "_packed");
        const io::TensorView scale = ckpt.view(kExpert + "_scale");
        const std::int32_t wrongShape[2] = {128, 32};
        std::vector<std::string> parts;
        if (damage == "no scale") {
            t.hide(kExpert + "_scale");
            parts = {kExpert, "no '", "weight_scale'"};
        } else if (damage == "no shape") {
            t.hide(kExpert + "_shape");
            parts = {"weight_shape'", "incomplete"};
        } else if (damage == "packed shape") {
            t.replace(kExpert + "_packed", {"", io::DType::I32, {128, 4}, packed.data});
            parts = {"weight_packed", "[128, 4]", "expected [128, 8]"};
        } else if (damage == "scale shape") {
            t.replace(kExpert + "_scale", {"", io::DType::BF16, {128, 1}, scale.data});
            parts = {"weight_scale", "[128, 1]", "expected [128, 2]", "groups of 32"};
        } else if (damage == "packed type") {
            t.replace(kExpert + "_packed", {"", io::DType::U8, {128, 32}, packed.data});
            parts = {"weight_packed", "U8", "I32"};
        } else if (damage == "shape says") {
            t.replace(kExpert + "_shape", {"", io::DType::I32, {2}, reinterpret_cast<const std::byte*>(wrongShape)});
            parts = {"weight_shape", "says [128, 32]", "expected [128, 64]"};
        } else {  // a dense product stored as int4: only routed experts may be
            const std::string o = "model.layers.1.self_attn.o_proj.weight";
            t.hide(o);
            t.replace(o + "_packed", packed);
            parts = {o, "routed experts only"};
        }
        try {
            model::loadWeights(t, config);
            QFAIL("no tandem::Error");
        } catch (const Error& e) {
            for (const auto& p : parts)
                QVERIFY2(std::string(e.what()).find(p) != std::string::npos, qPrintable(QString("'%1' lacks '%2'").arg(e.what(), p.c_str())));
        }
    }

    // int4 weights whose config does not say compressed-tensors: the mismatch is named.
    void refusesPackedWeightsWithoutTheConfig() {
        nlohmann::json j = nlohmann::json::parse(fixtureConfig());
        j.erase("quantization_config");
        const auto config = model::parseModelConfig(j.dump(), "", "config.json");
        const io::Checkpoint ckpt(fixturePath(kFixture).toStdString());
        expectError([&] { model::loadWeights(ckpt, config); }, {"compressed-tensors int4", "quantization_config"});
    }

    // tandem-cli convert --experts int4 writes the repacked bytes themselves; bf16 and int8 dequantize.
    void convertKeepsThemExactly() {
        QTemporaryDir tmp;
        const std::string source = fixturePath(kFixture).toStdString();
        const auto config = model::loadModelConfig(source);
        const io::Checkpoint ckpt(source);
        const auto weights = model::loadWeights(ckpt, config);
        const std::string out = tmp.filePath("int4").toStdString();
        convert::convertModel({source, out, io::ExpertType::INT4, 2}, {});
        const io::PackedStore store(out);
        QCOMPARE(store.expertType(), io::ExpertType::INT4);
        const io::ExpertLayout& l = store.layout();
        AlignedBuffer buffer(l.expertBytes);
        for (const int layer : store.moeLayers())
            for (int e = 0; e < config.numExperts; ++e) {
                const auto& x = weights.layers[static_cast<std::size_t>(layer)].moe->experts[static_cast<std::size_t>(e)];
                cpu::packCheckpointExpert(l, x.gate, x.up, x.down, buffer.p);
                const std::byte* stored = store.layerExperts(layer) + static_cast<std::size_t>(e) * l.expertBytes;
                QVERIFY2(std::memcmp(stored, buffer.p, l.expertBytes) == 0, qPrintable(QString("layer %1 expert %2").arg(layer).arg(e)));
                expectSameValues(l, stored, x, QString("store layer %1 expert %2").arg(layer).arg(e));
            }
        // The dense file keeps what the release keeps unquantized, and none of the experts' tensors.
        const io::Checkpoint dense(out);
        QVERIFY(dense.has("model.layers.1.self_attn.o_proj.weight"));
        for (const auto& name : dense.tensorNames()) QVERIFY2(name.find(".experts.") == std::string::npos, name.c_str());

        const std::string bf16 = tmp.filePath("bf16").toStdString();
        convert::convertModel({source, bf16, io::ExpertType::BF16, 2}, {});
        const io::PackedStore bf16Store(bf16);
        std::vector<float> row(static_cast<std::size_t>(config.hiddenSize)), want(row.size());
        const auto& x = weights.layers[2].moe->experts[5];
        x.gate.dequantRow(3, want.data());
        cpu::unpackExpertRow(bf16Store.layout(), bf16Store.layerExperts(2) + 5 * bf16Store.layout().expertBytes,
                             cpu::ExpertMatrix::Gate, 3, row.data());
        for (std::size_t i = 0; i < row.size(); ++i) QCOMPARE(row[i], io::bf16ToFloat(io::floatToBf16(want[i])));
    }

    // A folder of int4 experts loads them as int4 by default (exact, a quarter of bf16's memory); asked for
    // bf16 or int8, they are dequantized.
    void loadsAsInt4ByDefault() {
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        QCOMPARE(Engine::load(fixturePath(kFixture).toStdString(), o)->info().experts, std::string("int4"));
        o.experts = ExpertPrecision::BF16;
        QCOMPARE(Engine::load(fixturePath(kFixture).toStdString(), o)->info().experts, std::string("bf16"));
    }
};

QTEST_GUILESS_MAIN(CompressedTensorsTest)
#include "tst_compressed_tensors.moc"
