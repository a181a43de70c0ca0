// A GGUF seen as the model it holds: the configuration from llama.cpp's metadata equals the one of the
// fixture's config.json, the tokenizer made from tokenizer.ggml.* encodes every golden.json case as
// the Hugging Face original does, and what cannot be imported fails with a message saying why.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <functional>
#include <cstring>

#include <nlohmann/json.hpp>

#include "gguf_fixture.h"
#include "gguf_quantize.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/gguf_config.h"
#include "model/gguf_tensors.h"
#include "convert/convert_model.h"
#include "cpu/expert_pack.h"
#include "cpu/int4_repack.h"
#include "io/checkpoint.h"
#include "io/expert_layout.h"
#include "model/weights.h"
#include "tandem/engine.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "test_support.h"
#include "text/gguf_tokenizer.h"
#include "text/pre_tokenizer.h"

using namespace tandem;
using namespace tandem::test;

class GgufImportTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    QString writeGguf(const QString& fixture, const GgufWriter& w) {
        const QString path = tmp_.filePath(fixture + ".gguf");
        writeFile(path, w.bytes());
        return path;
    }

    void expectError(const GgufWriter& w, const char* expected) {
        const QString path = tmp_.filePath("broken.gguf");
        writeFile(path, w.bytes());
        try {
            const io::GgufModel gguf(path.toStdString());
            const auto config = model::ggufModelConfig(gguf);
            text::ggufTokenizerFiles(gguf);
            model::GgufTensors tensors(gguf, config);
            QFAIL(qPrintable(QString("no error; expected '%1'").arg(expected)));
        } catch (const Error& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
        }
    }

private slots:
    void configMatchesConfigJson_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<bool>("splitKvB");
        for (const auto& f : ggufFixtureNames()) {
            QTest::newRow(qPrintable(f)) << f << true;
            if (f.contains("deepseek")) QTest::newRow(qPrintable(f + "-kv_b")) << f << false;
        }
    }
    void configMatchesConfigJson() {
        QFETCH(QString, fixture);
        QFETCH(bool, splitKvB);
        const io::GgufModel gguf(writeGguf(fixture, ggufFromFixture(fixture, {kF32, splitKvB})).toStdString());
        const model::ModelConfig a = model::ggufModelConfig(gguf);
        const model::ModelConfig b = model::loadModelConfig(fixturePath(fixture).toStdString());
        QCOMPARE(a.family, b.family);
        QCOMPARE(a.vocabSize, b.vocabSize);
        QCOMPARE(a.hiddenSize, b.hiddenSize);
        QCOMPARE(a.numLayers, b.numLayers);
        QCOMPARE(a.numHeads, b.numHeads);
        QCOMPARE(a.numKvHeads, b.numKvHeads);
        QCOMPARE(a.headDim, b.headDim);
        QCOMPARE(a.kvLoraRank, b.kvLoraRank);
        QCOMPARE(a.qLoraRank, b.qLoraRank);
        QCOMPARE(a.qkNopeHeadDim, b.qkNopeHeadDim);
        QCOMPARE(a.vHeadDim, b.vHeadDim);
        QCOMPARE(a.numExperts, b.numExperts);
        QCOMPARE(a.moeIntermediateSize, b.moeIntermediateSize);
        QCOMPARE(a.intermediateSize, b.intermediateSize);
        QCOMPARE(a.numSharedExperts, b.numSharedExperts);
        QCOMPARE(a.firstKDenseReplace, b.firstKDenseReplace);
        QCOMPARE(a.router.topK, b.router.topK);
        QCOMPARE(a.router.scoring, b.router.scoring);
        QCOMPARE(a.router.selection, b.router.selection);
        QCOMPARE(a.router.numGroups, b.router.numGroups);
        QCOMPARE(a.router.topKGroups, b.router.topKGroups);
        QCOMPARE(a.router.normalize, b.router.normalize);
        QCOMPARE(a.router.scale, b.router.scale);
        QCOMPARE(a.router.hasCorrectionBias, b.router.hasCorrectionBias);
        QCOMPARE(a.ropeTheta, b.ropeTheta);
        QCOMPARE(a.rmsNormEps, b.rmsNormEps);
        QCOMPARE(a.maxPositionEmbeddings, b.maxPositionEmbeddings);
        QCOMPARE(a.tieWordEmbeddings, b.tieWordEmbeddings);
        // gpt-oss's: biases, sinks, the sliding layers and the clamped SwiGLU
        QCOMPARE(a.attentionBias, b.attentionBias);
        QCOMPARE(a.attentionOutputBias, b.attentionOutputBias);
        QCOMPARE(a.attentionSinks, b.attentionSinks);
        QCOMPARE(a.slidingWindow, b.slidingWindow);
        QCOMPARE(a.slidingLayers, b.slidingLayers);
        QCOMPARE(a.routerBias, b.routerBias);
        QCOMPARE(a.expertBiases, b.expertBiases);
        QCOMPARE(a.expertActivation, b.expertActivation);
        QCOMPARE(a.swigluAlpha, b.swigluAlpha);
        QCOMPARE(a.swigluLimit, b.swigluLimit);
        QCOMPARE(a.yarn.has_value(), b.yarn.has_value());
        if (a.yarn) {
            QCOMPARE(a.yarn->factor, b.yarn->factor);
            QCOMPARE(a.yarn->betaFast, b.yarn->betaFast);
            QCOMPARE(a.yarn->betaSlow, b.yarn->betaSlow);
            QCOMPARE(a.yarn->truncate, b.yarn->truncate);
            QVERIFY(std::fabs(a.yarn->mscaleAllDim - b.yarn->mscaleAllDim) < 1e-6);
            QCOMPARE(a.yarn->originalMaxPositions, b.yarn->originalMaxPositions);
        }
        // Mixtral's query/key rows stay in llama.cpp's rope order, described as interleaved rope.
        QCOMPARE(a.ropeInterleaved, b.ropeInterleaved || fixture.contains("mixtral"));
        const model::GgufTensors tensors(gguf, a);
        QVERIFY(tensors.has("model.layers.1.self_attn.o_proj.weight"));
        QVERIFY(!tensors.has("model.layers.3.eh_proj.weight"));  // DeepSeek-V3's MTP layer is left out
    }

    // gpt-oss from llama.cpp's layout (per-expert MXFP4 views of ffn_*_exps, split biases) against the
    // release's (fused, interleaved gate/up blocks): every expert row and bias the same values, and packed as
    // MXFP4 the same values -- the GGUF's experts go through the float packer, which rounds an MXFP4 group
    // back to its own values (its scale may differ where a group's largest code is below 6), the release's
    // through the bit-exact repacker.
    void gptOssExpertsMatchTheRelease() {
        const QString fixture = "tiny-gpt-oss";
        const io::GgufModel gguf(writeGguf(fixture, ggufFromFixture(fixture, {kQ8_0, true})).toStdString());
        const model::ModelConfig config = model::ggufModelConfig(gguf);
        const model::GgufTensors tensors(gguf, config);
        const model::ModelWeights fromGguf = model::loadWeights(tensors, config);
        const model::ModelConfig hfConfig = model::loadModelConfig(fixturePath(fixture).toStdString());
        const io::Checkpoint ckpt(fixturePath(fixture).toStdString());
        const model::ModelWeights fromHf = model::loadWeights(ckpt, hfConfig);
        QVERIFY(tensors.has("model.layers.0.mlp.experts.15.gate_proj.weight"));
        QVERIFY(tensors.has("model.layers.3.mlp.experts.up_proj_bias"));
        QVERIFY(tensors.has("model.layers.2.self_attn.sinks"));
        QVERIFY(tensors.has("model.layers.1.mlp.router.bias"));
        QCOMPARE(tensors.view("model.layers.0.mlp.experts.0.down_proj.weight").dtype, io::DType::MXFP4);

        const io::ExpertLayout layout = io::ExpertLayout::make(io::ExpertType::MXFP4, config.hiddenSize, config.moeIntermediateSize);
        struct Buffer {
            explicit Buffer(std::size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
            ~Buffer() { std::free(p); }
            std::byte* p;
        } a(layout.expertBytes), b(layout.expertBytes);
        std::vector<float> x(static_cast<std::size_t>(std::max(config.hiddenSize, config.moeIntermediateSize))), y(x.size()), z(x.size());
        const auto sameRows = [&](const cpu::WeightMatrix& g, const cpu::WeightMatrix& h, const std::byte* packed, cpu::ExpertMatrix which) {
            QCOMPARE(g.rows, h.rows);
            QCOMPARE(g.cols, h.cols);
            for (std::int64_t r = 0; r < g.rows; ++r) {
                g.dequantRow(r, x.data());
                h.dequantRow(r, y.data());
                cpu::unpackExpertRow(layout, packed, which, static_cast<int>(r), z.data());
                QVERIFY2(std::memcmp(x.data(), y.data(), static_cast<std::size_t>(g.cols) * 4) == 0, qPrintable(QString("row %1").arg(r)));
                for (std::size_t c = 0; c < x.size() && c < static_cast<std::size_t>(g.cols); ++c)
                    if (x[c] != z[c])  // equal values (a zero's sign may differ between the packers)
                        QFAIL(qPrintable(QString("packed row %1 col %2: %3, expected %4").arg(r).arg(c).arg(z[c]).arg(x[c])));
            }
        };
        for (int l = 0; l < config.numLayers; ++l) {
            const auto& g = *fromGguf.layers[static_cast<std::size_t>(l)].moe;
            const auto& h = *fromHf.layers[static_cast<std::size_t>(l)].moe;
            QCOMPARE(g.gateBias, h.gateBias);
            QCOMPARE(g.upBias, h.upBias);
            QCOMPARE(g.downBias, h.downBias);
            QCOMPARE(g.routerBias, h.routerBias);
            QCOMPARE(fromGguf.layers[static_cast<std::size_t>(l)].gqa.sinks, fromHf.layers[static_cast<std::size_t>(l)].gqa.sinks);
            QCOMPARE(g.experts.size(), h.experts.size());
            for (std::size_t e = 0; e < g.experts.size(); ++e) {
                const auto& ge = g.experts[e];
                const auto& he = h.experts[e];
                QCOMPARE(ge.gate.dtype, io::DType::MXFP4);
                QCOMPARE(he.gate.dtype, io::DType::E2M1);
                cpu::packCheckpointExpert(layout, ge.gate, ge.up, ge.down, a.p);
                cpu::packCheckpointExpert(layout, he.gate, he.up, he.down, b.p);
                sameRows(ge.gate, he.gate, a.p, cpu::ExpertMatrix::Gate);
                sameRows(ge.up, he.up, a.p, cpu::ExpertMatrix::Up);
                sameRows(ge.down, he.down, a.p, cpu::ExpertMatrix::Down);
                sameRows(ge.gate, he.gate, b.p, cpu::ExpertMatrix::Gate);
                sameRows(ge.up, he.up, b.p, cpu::ExpertMatrix::Up);
                sameRows(ge.down, he.down, b.p, cpu::ExpertMatrix::Down);
            }
        }
    }

    // attention.sliding_window_pattern as llama.cpp reads it: a per-layer array of booleans, or a period
    // whose last layer attends to everything (default 2); a different rotary base for the sliding layers
    // is refused.
    void gptOssSlidingPatterns() {
        const auto layersOf = [&](const std::function<void(GgufWriter&)>& extra) {
            GgufWriter w = ggufFromFixture("tiny-gpt-oss", {kF32, true});
            extra(w);
            const io::GgufModel gguf(writeGguf("gpt-oss-swa", w).toStdString());
            return model::ggufModelConfig(gguf).slidingLayers;
        };
        QCOMPARE(layersOf([](GgufWriter&) {}), std::vector<bool>({true, false, true, false}));
        QCOMPARE(layersOf([](GgufWriter& w) { w.u32("gpt-oss.attention.sliding_window_pattern", 3); }),
                 std::vector<bool>({true, true, false, true}));
        QCOMPARE(layersOf([](GgufWriter& w) {
                     QByteArray v = GgufWriter::le<std::uint32_t>(GgufWriter::Bool) + GgufWriter::le<std::uint64_t>(4);
                     for (const char b : {0, 1, 1, 0}) v.append(b);
                     w.raw("gpt-oss.attention.sliding_window_pattern", GgufWriter::Array, v);
                 }),
                 std::vector<bool>({false, true, true, false}));
        try {
            layersOf([](GgufWriter& w) { w.f32("gpt-oss.rope.freq_base_swa", 10000.0f); });
            QFAIL("a second rotary base was imported");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("metadata 'gpt-oss.rope.freq_base_swa' differs from rope.freq_base"), e.what());
        }
    }

    // What an incomplete gpt-oss file lacks is named: the experts' biases, one of the split pair.
    void gptOssRefusesIncompleteFiles() {
        const auto loadError = [&](std::vector<std::string> leaveOut) {
            GgufFixtureOptions o{kF32, true};
            o.leaveOut = std::move(leaveOut);
            const QString path = writeGguf("gpt-oss-incomplete", ggufFromFixture("tiny-gpt-oss", o));
            try {
                const io::GgufModel gguf(path.toStdString());
                const auto config = model::ggufModelConfig(gguf);
                model::loadWeights(model::GgufTensors(gguf, config), config);
            } catch (const Error& e) {
                return QString::fromUtf8(e.what());
            }
            return QString();
        };
        QCOMPARE(loadError({}), QString());
        const QString both = loadError({"blk.1.ffn_gate_exps.bias", "blk.1.ffn_up_exps.bias"});
        QVERIFY2(both.contains("gpt-oss's expert biases are missing") && both.contains("model.layers.1.mlp.experts.gate_proj_bias"),
                 qPrintable(both));
        const QString up = loadError({"blk.2.ffn_up_exps.bias"});
        QVERIFY2(up.contains("'model.layers.2.mlp.experts.up_proj_bias' is missing"), qPrintable(up));
        const QString down = loadError({"blk.0.ffn_down_exps.bias"});
        QVERIFY2(down.contains("model.layers.0.mlp.experts.down_proj_bias") && down.contains("missing"), qPrintable(down));
        const QString sinks = loadError({"blk.3.attn_sinks.weight"});
        QVERIFY2(sinks.contains("model.layers.3.self_attn.sinks"), qPrintable(sinks));
    }

    void tokenizerMatchesGolden_data() {
        QTest::addColumn<QString>("fixture");
        for (const auto& f : ggufFixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void tokenizerMatchesGolden() {
        QFETCH(QString, fixture);
        const io::GgufModel gguf(writeGguf(fixture, ggufFromFixture(fixture, {kF32, true})).toStdString());
        const auto files = text::ggufTokenizerFiles(gguf);
        const auto tokenizer = text::Tokenizer::fromJson(files.tokenizerJson, "tokenizer.json from GGUF");
        const QJsonArray cases = QJsonDocument::fromJson(readFile(fixturePath(fixture) + "/golden.json"))
                                     .object()["tokenizer"].toObject()["encode"].toArray();
        QVERIFY(cases.size() > 5);
        auto ids = [](const QJsonValue& v) {
            std::vector<int> out;
            for (const auto& id : v.toArray()) out.push_back(id.toInt());
            return out;
        };
        for (const auto& c : cases) {
            const auto o = c.toObject();
            const std::string text = o["text"].toString().toStdString();
            QCOMPARE(tokenizer.encode(text, false), ids(o["ids"]));
            QCOMPARE(tokenizer.encode(text, true), ids(o["ids_with_specials"]));
            QCOMPARE(QString::fromStdString(tokenizer.decode(ids(o["ids"]), false)), o["decoded"].toString());
        }
        const auto config = QJsonDocument::fromJson(QByteArray::fromStdString(files.tokenizerConfigJson)).object();
        const auto original = QJsonDocument::fromJson(readFile(fixturePath(fixture) + "/tokenizer_config.json")).object();
        QCOMPARE(config["eos_token"], original["eos_token"]);
        QCOMPARE(config["chat_template"], original["chat_template"]);
    }

    // gpt-oss's o200k pre-tokenizer (llama.cpp's "gpt-4o"): a case change starts a word, contractions of any
    // case stay on their word, digits go in threes, a slash joins the newline after punctuation.
    void gpt4oPreTokenizer() {
        GgufFixtureOptions o{kF32, true};
        o.pre = "gpt-4o";
        const io::GgufModel gguf(writeGguf("gpt-4o", ggufFromFixture("tiny-gpt-oss", o)).toStdString());
        const auto files = text::ggufTokenizerFiles(gguf);
        text::Tokenizer::fromJson(files.tokenizerJson, "tokenizer.json from GGUF");  // it loads
        const auto json = nlohmann::json::parse(files.tokenizerJson);
        const auto split = text::makePreTokenizer(json["pre_tokenizer"]["pretokenizers"][0], "the Split step");
        const auto words = [&](const std::string& s) {
            QStringList out;
            split->split({s, true}, [&](const text::Piece& p) { out << QString::fromStdString(std::string(p.text)); });
            return out;
        };
        QCOMPARE(words("helloWorld fooBAR HTTPServer"), QStringList({"hello", "World", " foo", "BAR", " HTTPServer"}));
        QCOMPARE(words("it'S we'LL"), QStringList({"it'S", " we'LL"}));
        QCOMPARE(words("1234567"), QStringList({"123", "456", "7"}));
        QCOMPARE(words("x ... /\n"), QStringList({"x", " ...", " /\n"}));
        QCOMPARE(words("Über straße"), QStringList({"Über", " straße"}));
    }

    void refusesWhatItCannotImport() {
        QByteArray archBytes = ggufFromFixture("tiny-qwen3moe", {kF32, true}).bytes();
        archBytes.replace("qwen3moe", "qwen9moe");  // the architecture and every key of it
        const QString archPath = tmp_.filePath("arch.gguf");
        writeFile(archPath, archBytes);
        try {
            model::ggufModelConfig(io::GgufModel(archPath.toStdString()));
            QFAIL("an unknown architecture was imported");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("architecture 'qwen9moe' is not supported"), e.what());
        }

        GgufWriter pre = ggufFromFixture("tiny-qwen3moe", {kF32, true});
        QByteArray bytes = pre.bytes();
        bytes.replace("qwen2", "qwenX");
        const QString path = tmp_.filePath("pre.gguf");
        writeFile(path, bytes);
        const io::GgufModel gguf(path.toStdString());
        QVERIFY_THROWS_EXCEPTION(Error, text::ggufTokenizerFiles(gguf));
        try {
            text::ggufTokenizerFiles(gguf);
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("pre-tokenizer 'qwenX'"), e.what());
        }
    }

    // A damaged block_count made the import look for tensors of billions of layers (found by fuzz_gguf).
    void refusesHugeLayerCounts() {
        for (const auto& [fixture, arch] : {std::pair{"tiny-qwen3moe", "qwen3moe"}, {"tiny-deepseekv3-fp8", "deepseek2"}}) {
            QByteArray bytes = ggufFromFixture(fixture, {kF32, true}).bytes();
            const QByteArray key = QByteArray(arch) + ".block_count";
            const qsizetype at = bytes.indexOf(key);
            QVERIFY(at > 0);
            bytes.replace(at + key.size() + 4, 4, GgufWriter::le(std::uint32_t{0x7fffffff}));  // after the type
            const QString path = tmp_.filePath("layers.gguf");
            writeFile(path, bytes);
            try {
                model::ggufModelConfig(io::GgufModel(path.toStdString()));
                QFAIL("a block_count of 2^31-1 was imported");
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains("block_count' is 2147483647, not a number of layers"), e.what());
            }
        }
    }

    void refusesTextThatIsNotUtf8() {
        // Not "internal error: [json.exception.type_error.316]" when the tokenizer files are written.
        const QByteArray good = ggufFromFixture("tiny-qwen3moe", {kF32, true}).bytes();
        const auto errorOf = [&](const QByteArray& from, const QByteArray& to) {
            QByteArray bytes = good;
            bytes.replace(from, to);  // the same length, so every offset still holds
            const QString path = tmp_.filePath("utf8.gguf");
            writeFile(path, bytes);
            try {
                text::ggufTokenizerFiles(io::GgufModel(path.toStdString()));
            } catch (const Error& e) {
                return QString::fromUtf8(e.what());
            }
            return QString();
        };
        const QString token = errorOf("<|im_start|>", "<|im_st\xffrt|>");
        QVERIFY2(token.contains("metadata 'tokenizer.ggml.tokens' entry ") && token.contains("is not valid UTF-8 text"),
                 qPrintable(token));
        const QString chatTemplate = errorOf("enable_thinking", "enable\xc3thinking");
        QVERIFY2(chatTemplate.contains("metadata 'tokenizer.chat_template' is not valid UTF-8 text"), qPrintable(chatTemplate));
        // A template that does not parse fails the conversion, not every chat with the store afterwards.
        const QString broken = errorOf("{%- endfor %}", "{%- endfxr %}");
        QVERIFY2(broken.contains("metadata 'tokenizer.chat_template'") && broken.contains("line"), qPrintable(broken));
    }

    void refusesUnknownTensorsAndTypes() {
        GgufWriter extra = ggufFromFixture("tiny-qwen3moe", {kF32, true});
        extra.tensor("blk.0.attn_sinks.weight", kF32, {4}, QByteArray(16, '\0'));
        expectError(extra, "tensor 'blk.0.attn_sinks.weight' is not part of a qwen3_moe model");

        GgufWriter q2 = ggufFromFixture("tiny-qwen3moe", {kF32, true});
        q2.tensor("blk.0.attn_extra.weight", 10 /* Q2_K */, {256}, QByteArray(84, '\0'));
        expectError(q2, "has type Q2_K, which Tandem cannot read");
    }

    // The converter's resume works for a GGUF as for a folder: an interrupted conversion keeps its
    // finished layers, and a finished store is up to date.
    void conversionResumes() {
        const QString gguf = writeGguf("tiny-qwen3moe", ggufFromFixture("tiny-qwen3moe", {kQ4_0, true}));
        const QString store = tmp_.filePath("resumed-store");
        const convert::ConvertOptions options{gguf.toStdString(), store.toStdString(), io::ExpertType::INT4, 2};
        struct Interrupt {};
        try {
            convert::convertModel(options, [](const convert::ConvertProgress& p) {
                if (p.layer == 1) throw Interrupt{};
            });
            QFAIL("the conversion was not interrupted");
        } catch (const Interrupt&) {
        }
        QVERIFY(QDir(store + ".partial").exists());
        const auto resumed = convert::convertModel(options, {});
        QCOMPARE(resumed.resumedLayers, 1);
        QCOMPARE(resumed.packedLayers, 2);
        QVERIFY(resumed.denseResumed);
        QVERIFY(convert::convertModel(options, {}).upToDate);
        QVERIFY(QFile::exists(store + "/tokenizer_config.json"));
    }

    void engineAsksToConvert() {
        const QString path = writeGguf("tiny-qwen3moe", ggufFromFixture("tiny-qwen3moe", {kF32, true}));
        try {
            Engine::load(path.toStdString());
            QFAIL("a .gguf loaded directly");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("tandem-cli convert --model"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(GgufImportTest)
#include "tst_gguf_import.moc"
