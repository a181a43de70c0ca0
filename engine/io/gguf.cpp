#include "io/gguf.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>

#include "tandem/error.h"

namespace tandem::io {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxDims = 4;        // ggml's GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;          // arrays of arrays exist in the format; deeper is corruption
// Far above any real model (vocabularies and merges: ~10^5 items; tensors: ~10^4), far below what would
// exhaust memory when a damaged count is believed.
constexpr std::uint64_t kMaxArrayItems = std::uint64_t{1} << 26;
constexpr std::uint64_t kMaxTensors = std::uint64_t{1} << 20;
constexpr const char* kDamaged = " (the file is truncated or damaged; download it again)";

// Reads the header part of a GGUF file front to back; every read is checked against the end.
class Reader {
public:
    Reader(std::span<const std::byte> bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {}

    [[noreturn]] void fail(const std::string& what) const { throw Error(where_ + ": " + what); }

    void need(std::uint64_t n, const std::string& what) const {
        if (n > bytes_.size() - pos_)
            fail(what + " runs past the end of the " + std::to_string(bytes_.size()) + "-byte file at byte " +
                 std::to_string(pos_) + kDamaged);
    }

    template <class T>
    T scalar(const std::string& what) {
        need(sizeof(T), what);
        T v{};
        for (std::size_t i = 0; i < sizeof(T); ++i)
            v = static_cast<T>(v | static_cast<T>(static_cast<std::uint64_t>(bytes_[pos_ + i]) << (8 * i)));
        pos_ += sizeof(T);
        return v;
    }

    std::string string(const std::string& what) {
        const auto length = scalar<std::uint64_t>(what + "'s length");
        need(length, what);
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(length));
        pos_ += length;
        return s;
    }

    std::uint64_t pos() const { return pos_; }
    std::uint64_t remaining() const { return bytes_.size() - pos_; }

private:
    std::span<const std::byte> bytes_;
    std::string where_;
    std::uint64_t pos_ = 0;
};

std::uint64_t minimumBytes(GgufValueType t) {
    switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::Array: return 12;
    default: return 8;  // U64, I64, F64, and a string's length
    }
}

GgufValue readValue(Reader& r, GgufValueType type, const std::string& what, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
    case GgufValueType::U8: v.integer = r.scalar<std::uint8_t>(what); break;
    case GgufValueType::I8: v.integer = static_cast<std::int8_t>(r.scalar<std::uint8_t>(what)); break;
    case GgufValueType::U16: v.integer = r.scalar<std::uint16_t>(what); break;
    case GgufValueType::I16: v.integer = static_cast<std::int16_t>(r.scalar<std::uint16_t>(what)); break;
    case GgufValueType::U32: v.integer = r.scalar<std::uint32_t>(what); break;
    case GgufValueType::I32: v.integer = static_cast<std::int32_t>(r.scalar<std::uint32_t>(what)); break;
    case GgufValueType::I64: v.integer = static_cast<std::int64_t>(r.scalar<std::uint64_t>(what)); break;
    case GgufValueType::U64: {
        const auto u = r.scalar<std::uint64_t>(what);
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) r.fail(what + " is out of range");
        v.integer = static_cast<std::int64_t>(u);
        break;
    }
    case GgufValueType::F32: {
        const auto bits = r.scalar<std::uint32_t>(what);
        float f;
        std::memcpy(&f, &bits, 4);
        v.real = f;
        break;
    }
    case GgufValueType::F64: {
        const auto bits = r.scalar<std::uint64_t>(what);
        std::memcpy(&v.real, &bits, 8);
        break;
    }
    case GgufValueType::Bool: {
        const auto b = r.scalar<std::uint8_t>(what);
        if (b > 1) r.fail(what + " is a boolean of value " + std::to_string(b));
        v.boolean = b == 1;
        break;
    }
    case GgufValueType::String: v.string = r.string(what); break;
    case GgufValueType::Array: {
        if (depth >= kMaxArrayNesting) r.fail(what + " nests arrays deeper than " + std::to_string(kMaxArrayNesting));
        const auto itemType = r.scalar<std::uint32_t>(what + "'s item type");
        if (itemType > static_cast<std::uint32_t>(GgufValueType::F64))
            r.fail(what + " has items of unknown type " + std::to_string(itemType) + kDamaged);
        v.itemType = static_cast<GgufValueType>(itemType);
        const auto count = r.scalar<std::uint64_t>(what + "'s length");
        if (count > r.remaining() / minimumBytes(v.itemType) || count > kMaxArrayItems)
            r.fail(what + " claims " + std::to_string(count) + " items, more than the rest of the file holds" + kDamaged);
        v.items.reserve(static_cast<std::size_t>(count));
        for (std::uint64_t i = 0; i < count; ++i) v.items.push_back(readValue(r, v.itemType, what, depth + 1));
        break;
    }
    default: r.fail(what + " has unknown value type " + std::to_string(static_cast<std::uint32_t>(type)) + kDamaged);
    }
    return v;
}

// ggml's byte count of a tensor: rows of whole blocks. Refuses rows that are not whole blocks and
// sizes that overflow.
std::uint64_t tensorBytes(const GgufTensor& t, const Reader& r) {
    const std::string what = "tensor '" + t.name + "' " + t.dimsString();
    if (t.dims[0] % t.type->blockValues != 0)
        r.fail(what + " of type " + std::string(t.type->name) + " has rows of " + std::to_string(t.dims[0]) +
               " values, not a multiple of its block of " + std::to_string(t.type->blockValues));
    const std::uint64_t blocks = static_cast<std::uint64_t>(t.dims[0]) / t.type->blockValues;
    if (blocks > std::numeric_limits<std::uint64_t>::max() / t.type->blockBytes) r.fail(what + " is too large" + kDamaged);
    std::uint64_t bytes = blocks * t.type->blockBytes;
    for (std::size_t i = 1; i < t.dims.size(); ++i) {
        const auto d = static_cast<std::uint64_t>(t.dims[i]);
        if (bytes > std::numeric_limits<std::uint64_t>::max() / d) r.fail(what + " is too large" + kDamaged);
        bytes *= d;
    }
    return bytes;
}

}  // namespace

bool GgufValue::isInteger() const {
    switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64: return true;
    default: return false;
    }
}

std::int64_t GgufTensor::rows() const {
    std::int64_t n = 1;
    for (std::size_t i = 1; i < dims.size(); ++i) n *= dims[i];
    return n;
}

std::string GgufTensor::dimsString() const {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

GgufFile::GgufFile(const fs::path& path) : file_(path) {
    const auto bytes = file_.bytes();
    Reader r(bytes, path.string());
    if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0)
        r.fail("not a GGUF file (it does not start with 'GGUF'); choose a .gguf model file or a Hugging Face folder");
    r.scalar<std::uint32_t>("magic");
    version_ = r.scalar<std::uint32_t>("the version");
    if (version_ != 2 && version_ != 3)
        r.fail("GGUF version " + std::to_string(version_) +
               " is not supported (Tandem reads versions 2 and 3, little-endian); convert the model again with a "
               "current llama.cpp");
    const auto tensorCount = r.scalar<std::uint64_t>("the tensor count");
    const auto keyCount = r.scalar<std::uint64_t>("the metadata count");
    // A key/value takes at least 13 bytes and a tensor info 24: larger counts cannot fit.
    if (keyCount > r.remaining() / 13 || tensorCount > r.remaining() / 24 || tensorCount > kMaxTensors)
        r.fail("the header claims " + std::to_string(tensorCount) + " tensors and " + std::to_string(keyCount) +
               " metadata entries, more than the file can hold" + kDamaged);

    for (std::uint64_t i = 0; i < keyCount; ++i) {
        const std::string key = r.string("metadata key " + std::to_string(i));
        const auto type = r.scalar<std::uint32_t>("the type of metadata '" + key + "'");
        GgufValue value = readValue(r, static_cast<GgufValueType>(type), "metadata '" + key + "'", 0);
        if (!metadata_.emplace(key, std::move(value)).second) r.fail("metadata key '" + key + "' appears twice" + kDamaged);
    }
    if (const auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
        const auto& a = it->second;
        if (!a.isInteger() || a.integer <= 0 || a.integer > (1 << 30) || (a.integer & (a.integer - 1)) != 0)
            r.fail("general.alignment must be a power of two" + std::string(kDamaged));
        alignment_ = static_cast<std::uint32_t>(a.integer);
    }

    tensors_.reserve(static_cast<std::size_t>(tensorCount));
    for (std::uint64_t i = 0; i < tensorCount; ++i) {
        GgufTensor t;
        t.name = r.string("tensor name " + std::to_string(i));
        const std::string what = "tensor '" + t.name + "'";
        const auto nDims = r.scalar<std::uint32_t>(what + "'s dimension count");
        if (nDims == 0 || nDims > kMaxDims)
            r.fail(what + " has " + std::to_string(nDims) + " dimensions (1 to 4 are possible)" + kDamaged);
        for (std::uint32_t d = 0; d < nDims; ++d) {
            const auto n = r.scalar<std::uint64_t>(what + "'s dimensions");
            if (n == 0 || n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                r.fail(what + " has a dimension of " + std::to_string(n) + kDamaged);
            t.dims.push_back(static_cast<std::int64_t>(n));
        }
        const auto type = r.scalar<std::uint32_t>(what + "'s type");
        t.type = ggmlType(type);
        if (!t.type)
            r.fail(what + " has ggml type " + std::to_string(type) + ", which Tandem does not know (it reads " +
                   std::string(supportedGgmlTypes()) + "); the file is damaged or newer than this build");
        t.offset = r.scalar<std::uint64_t>(what + "'s offset");
        if (t.offset % alignment_ != 0)
            r.fail(what + "'s data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                   std::to_string(alignment_) + kDamaged);
        t.bytes = tensorBytes(t, r);
        tensors_.push_back(std::move(t));
    }

    const std::uint64_t dataStart = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
    const std::uint64_t dataSize = dataStart <= bytes.size() ? bytes.size() - dataStart : 0;
    std::vector<const GgufTensor*> byOffset;
    std::map<std::string_view, int> names;
    for (auto& t : tensors_) {
        if (t.offset > dataSize || t.bytes > dataSize - t.offset)
            r.fail("tensor '" + t.name + "' (" + std::to_string(t.bytes) + " bytes at data offset " +
                   std::to_string(t.offset) + ") ends past the end of the file, whose data section holds " +
                   std::to_string(dataSize) + " bytes" + kDamaged);
        if (++names[t.name] > 1) r.fail("tensor '" + t.name + "' appears twice" + kDamaged);
        t.data = bytes.subspan(dataStart + t.offset, t.bytes);
        t.file = &file_.path();
        byOffset.push_back(&t);
    }
    std::sort(byOffset.begin(), byOffset.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < byOffset.size(); ++i)
        if (byOffset[i]->offset < byOffset[i - 1]->offset + byOffset[i - 1]->bytes)
            r.fail("tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name + "' overlap in the file" + kDamaged);
}

namespace {

// "NAME-00002-of-00005.gguf" -> {"NAME", 2, 5}.
struct SplitName {
    std::string stem, extension;  // the extension as the file spells it (".gguf", ".GGUF")
    int part = 0, count = 0;
};

std::optional<SplitName> splitName(const fs::path& path) {
    static const std::regex pattern(R"((.*)-(\d{5})-of-(\d{5})(\.gguf))", std::regex::icase);
    std::smatch m;
    const std::string name = path.filename().string();
    if (!std::regex_match(name, m, pattern)) return std::nullopt;
    return SplitName{m[1].str(), m[4].str(), std::stoi(m[2].str()), std::stoi(m[3].str())};
}

std::string partName(const SplitName& s, int part) {
    char digits[32];
    std::snprintf(digits, sizeof digits, "-%05d-of-%05d", part, s.count);
    return s.stem + digits + s.extension;
}

}  // namespace

bool GgufModel::isGgufPath(const fs::path& path) {
    std::string extension = path.extension().string();
    for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return extension == ".gguf";
}

GgufModel::GgufModel(const fs::path& path) {
    if (!fs::is_regular_file(path)) throw Error("GGUF file " + path.string() + " does not exist");
    const auto split = splitName(path);
    if (!split || split->count <= 1) {
        path_ = path;
        files_.push_back(std::make_unique<GgufFile>(path));
    } else {
        if (split->part < 1 || split->part > split->count)
            throw Error(path.string() + " names part " + std::to_string(split->part) + " of " +
                        std::to_string(split->count) + ", which cannot be");
        path_ = path.parent_path() / partName(*split, 1);
        for (int part = 1; part <= split->count; ++part) {
            const fs::path p = path.parent_path() / partName(*split, part);
            if (!fs::is_regular_file(p))
                throw Error(path.string() + " is part of a model split into " + std::to_string(split->count) +
                            " files, but " + p.filename().string() + " is missing from " +
                            path.parent_path().string() + "; download every part");
            files_.push_back(std::make_unique<GgufFile>(p));
        }
        const auto it = metadata().find("split.count");
        if (it != metadata().end() && (!it->second.isInteger() || it->second.integer != split->count))
            throw Error(path_.string() + ": split.count says the model has " + std::to_string(it->second.integer) +
                        " parts, but the file names say " + std::to_string(split->count));
    }
    for (const auto& f : files_)
        for (const auto& t : f->tensors())
            if (!tensors_.emplace(t.name, &t).second)
                throw Error(f->path().string() + ": tensor '" + t.name + "' is also in another part of the model");
}

const GgufValue* GgufModel::find(const std::string& key) const {
    const auto it = metadata().find(key);
    return it == metadata().end() ? nullptr : &it->second;
}

const GgufTensor* GgufModel::tensor(const std::string& name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
}

std::uint64_t GgufModel::totalBytes() const {
    std::uint64_t n = 0;
    for (const auto& [name, t] : tensors_) n += t->bytes;
    return n;
}

}  // namespace tandem::io
