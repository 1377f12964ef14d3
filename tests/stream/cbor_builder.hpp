#pragma once
// A tiny CBOR writer for tests, independent of libcbor and of the encoder
// under test: it writes item heads by RFC 8949's rules, so tests can craft
// exact bytes, including malformed ones.

#include <cstdint>
#include <string>
#include <vector>

namespace recon::stream::testing {

class CborBuilder {
public:
    /// Item head: major type 0..7 with its argument, shortest form.
    CborBuilder& head(int major, std::uint64_t value)
    {
        const auto m = static_cast<std::uint8_t>(major << 5);
        if (value < 24) {
            bytes_.push_back(m | static_cast<std::uint8_t>(value));
        } else if (value <= 0xff) {
            bytes_.push_back(m | 24);
            put(value, 1);
        } else if (value <= 0xffff) {
            bytes_.push_back(m | 25);
            put(value, 2);
        } else if (value <= 0xffffffffull) {
            bytes_.push_back(m | 26);
            put(value, 4);
        } else {
            bytes_.push_back(m | 27);
            put(value, 8);
        }
        return *this;
    }
    CborBuilder& self_describe() { return head(6, 55799); }
    CborBuilder& uint(std::uint64_t v) { return head(0, v); }
    CborBuilder& text(const std::string& s)
    {
        head(3, s.size());
        bytes_.insert(bytes_.end(), s.begin(), s.end());
        return *this;
    }
    CborBuilder& bytes(const std::vector<std::uint8_t>& b)
    {
        head(2, b.size());
        bytes_.insert(bytes_.end(), b.begin(), b.end());
        return *this;
    }
    CborBuilder& array(std::uint64_t n) { return head(4, n); }
    CborBuilder& map(std::uint64_t n) { return head(5, n); }
    CborBuilder& tag(std::uint64_t t) { return head(6, t); }
    CborBuilder& raw(std::initializer_list<std::uint8_t> b)
    {
        bytes_.insert(bytes_.end(), b);
        return *this;
    }
    /// A tag-40 array: [shape, typed_tag(bytes)].
    CborBuilder& md_array(const std::vector<std::uint64_t>& shape, std::uint64_t typed_tag,
                          const std::vector<std::uint8_t>& data)
    {
        tag(40).array(2).array(shape.size());
        for (auto d : shape) uint(d);
        return tag(typed_tag).bytes(data);
    }
    const std::vector<std::uint8_t>& data() const { return bytes_; }

private:
    void put(std::uint64_t value, int n)
    {
        for (int i = n - 1; i >= 0; --i) bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
    }
    std::vector<std::uint8_t> bytes_;
};

}  // namespace recon::stream::testing
