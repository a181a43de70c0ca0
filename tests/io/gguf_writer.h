#pragma once
// A GGUF writer for the tests (our own, written from the format's description): metadata of every
// value type, tensors of any ggml type given as raw bytes, version and alignment chosen by the test
// so malformed files can be made on purpose.
#include <QByteArray>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::test {

class GgufWriter {
public:
    enum Type : std::uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };

    void u32(const std::string& key, std::uint32_t v);
    void i32(const std::string& key, std::int32_t v);
    void u64(const std::string& key, std::uint64_t v);
    void f32(const std::string& key, float v);
    void boolean(const std::string& key, bool v);
    void string(const std::string& key, const std::string& v);
    void strings(const std::string& key, const std::vector<std::string>& v);
    void i32s(const std::string& key, const std::vector<std::int32_t>& v);
    // A key with a value of any type, encoded by the caller (without the type word).
    void raw(const std::string& key, std::uint32_t type, const QByteArray& value);

    // dims in ggml order (dims[0] is the row length).
    void tensor(const std::string& name, std::uint32_t ggmlType, std::vector<std::uint64_t> dims, QByteArray data);

    std::uint32_t version = 3;
    std::uint32_t alignment = 32;  // written as general.alignment when not 32

    QByteArray bytes() const;
    // The file split into `parts` files of whole tensors (gguf-split's layout: metadata in the first,
    // split.* keys in each), named stem-0000i-of-0000n.gguf in dir; returns their paths.
    std::vector<std::string> writeSplit(const std::string& dir, const std::string& stem, int parts) const;

    static QByteArray str(const std::string& s);  // a GGUF string: u64 length + bytes
    template <class T>
    static QByteArray le(T v) {
        QByteArray b(sizeof(T), '\0');
        for (std::size_t i = 0; i < sizeof(T); ++i) b[static_cast<int>(i)] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
        return b;
    }

private:
    struct Tensor {
        std::string name;
        std::uint32_t type;
        std::vector<std::uint64_t> dims;
        QByteArray data;
    };
    struct Kv {
        std::string key;
        std::uint32_t type;
        QByteArray value;
    };
    QByteArray build(const std::vector<Kv>& kvs, const std::vector<const Tensor*>& tensors) const;

    std::vector<Kv> kvs_;
    std::vector<Tensor> tensors_;
};

}  // namespace tandem::test
