#include "gguf_writer.h"

#include <QFile>
#include <cstring>

namespace tandem::test {

QByteArray GgufWriter::str(const std::string& s) {
    return le<std::uint64_t>(s.size()) + QByteArray(s.data(), static_cast<qsizetype>(s.size()));
}

void GgufWriter::raw(const std::string& key, std::uint32_t type, const QByteArray& value) { kvs_.push_back({key, type, value}); }
void GgufWriter::u32(const std::string& key, std::uint32_t v) { raw(key, U32, le(v)); }
void GgufWriter::i32(const std::string& key, std::int32_t v) { raw(key, I32, le(static_cast<std::uint32_t>(v))); }
void GgufWriter::u64(const std::string& key, std::uint64_t v) { raw(key, U64, le(v)); }
void GgufWriter::boolean(const std::string& key, bool v) { raw(key, Bool, QByteArray(1, v ? 1 : 0)); }
void GgufWriter::string(const std::string& key, const std::string& v) { raw(key, String, str(v)); }

void GgufWriter::f32(const std::string& key, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    raw(key, F32, le(bits));
}

void GgufWriter::strings(const std::string& key, const std::vector<std::string>& v) {
    QByteArray b = le<std::uint32_t>(String) + le<std::uint64_t>(v.size());
    for (const auto& s : v) b += str(s);
    raw(key, Array, b);
}

void GgufWriter::i32s(const std::string& key, const std::vector<std::int32_t>& v) {
    QByteArray b = le<std::uint32_t>(I32) + le<std::uint64_t>(v.size());
    for (const auto x : v) b += le(static_cast<std::uint32_t>(x));
    raw(key, Array, b);
}

void GgufWriter::tensor(const std::string& name, std::uint32_t ggmlType, std::vector<std::uint64_t> dims, QByteArray data) {
    tensors_.push_back({name, ggmlType, std::move(dims), std::move(data)});
}

QByteArray GgufWriter::build(const std::vector<Kv>& kvs, const std::vector<const Tensor*>& tensors) const {
    std::vector<Kv> all = kvs;
    if (alignment != 32) all.push_back({"general.alignment", U32, le(alignment)});
    QByteArray out = "GGUF" + le(version) + le<std::uint64_t>(tensors.size()) + le<std::uint64_t>(all.size());
    for (const auto& kv : all) out += str(kv.key) + le(kv.type) + kv.value;
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> offsets;
    for (const auto* t : tensors) {
        out += str(t->name) + le<std::uint32_t>(t->dims.size());
        for (const auto d : t->dims) out += le(d);
        out += le(t->type) + le(offset);
        offsets.push_back(offset);
        offset += (static_cast<std::uint64_t>(t->data.size()) + alignment - 1) / alignment * alignment;
    }
    while (out.size() % alignment) out += '\0';
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        out += tensors[i]->data;
        while (static_cast<std::uint64_t>(out.size()) % alignment) out += '\0';
    }
    return out;
}

QByteArray GgufWriter::bytes() const {
    std::vector<const Tensor*> all;
    for (const auto& t : tensors_) all.push_back(&t);
    return build(kvs_, all);
}

std::vector<std::string> GgufWriter::writeSplit(const std::string& dir, const std::string& stem, int parts) const {
    std::vector<std::string> paths;
    const std::size_t per = (tensors_.size() + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts);
    for (int p = 0; p < parts; ++p) {
        std::vector<const Tensor*> mine;
        for (std::size_t i = p * per; i < std::min(tensors_.size(), (p + 1) * per); ++i) mine.push_back(&tensors_[i]);
        std::vector<Kv> kvs = p == 0 ? kvs_ : std::vector<Kv>{};
        kvs.push_back({"split.no", U16, le<std::uint16_t>(p)});
        kvs.push_back({"split.count", U16, le<std::uint16_t>(parts)});
        kvs.push_back({"split.tensors.count", I32, le<std::uint32_t>(tensors_.size())});
        char name[64];
        std::snprintf(name, sizeof name, "-%05d-of-%05d.gguf", p + 1, parts);
        const std::string path = dir + "/" + stem + name;
        QFile f(QString::fromStdString(path));
        if (!f.open(QIODevice::WriteOnly) || f.write(build(kvs, mine)) < 0) return {};
        paths.push_back(path);
    }
    return paths;
}

}  // namespace tandem::test
