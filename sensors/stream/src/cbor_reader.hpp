#pragma once
// A bounded pull parser over one CBOR buffer, built on libcbor's streaming
// decoder: it hands out one item head at a time and never allocates for a
// length it has not seen the bytes of. Internal to sensors_stream.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace recon::stream::detail {

enum class TokenKind {
    unsigned_int, negative_int, bytes, text, array, map, tag, floating, boolean, null,
    undefined, brk, bytes_start, text_start,
};

const char* to_string(TokenKind kind);

struct Token {
    TokenKind kind = TokenKind::null;
    std::uint64_t value = 0;  // integer value, tag number, or collection size
    bool indefinite = false;  // array/map of indefinite length
    std::span<const std::uint8_t> data;  // definite byte/text string contents
    double number = 0.0;
    bool flag = false;
};

class CborReader {
public:
    CborReader(std::span<const std::uint8_t> bytes, std::size_t max_depth)
        : bytes_{bytes}, max_depth_{max_depth} {}

    /// Decodes the next item head; throws StreamError (truncated/malformed).
    Token next();
    /// Skips one whole item (its head is read here), nested up to max_depth.
    void skip(std::size_t depth = 0);
    /// Skips the rest of an item whose head `token` was just read.
    void skip_rest(const Token& token, std::size_t depth);

    std::uint64_t read_uint(const char* field);
    std::int64_t read_int(const char* field);
    double read_number(const char* field);
    std::string read_text(const char* field);
    /// Byte string contents (definite, or indefinite chunks concatenated).
    std::vector<std::uint8_t> read_bytes(const char* field);

    /// Reads a map head and calls fn(key) for each entry with a text key;
    /// fn must consume the value. Entries with other keys are skipped.
    template <typename Fn>
    void for_each_entry(const char* field, std::size_t depth, Fn&& fn)
    {
        const Token head = next();
        expect(head, TokenKind::map, field);
        check_depth(depth);
        for (std::uint64_t i = 0; head.indefinite || i < head.value; ++i) {
            if (head.indefinite && at_break()) break;
            const Token key = next();
            if (key.kind == TokenKind::text) {
                fn(std::string{key.data.begin(), key.data.end()});
            } else {
                skip_rest(key, depth + 1);
                skip(depth + 1);
            }
        }
    }

    /// Reads an array head (definite only) and returns its length.
    std::uint64_t read_array_head(const char* field);

    bool at_end() const { return pos_ == bytes_.size(); }
    std::size_t position() const { return pos_; }
    /// Returns to a position obtained from position().
    void seek(std::size_t pos) { pos_ = pos; }

    /// Throws bad_field "field: expected X, found Y" unless token is of kind.
    static void expect(const Token& token, TokenKind kind, const char* field);

private:
    bool at_break();  // consumes a break (0xff) when one is next
    void check_depth(std::size_t depth) const;

    std::span<const std::uint8_t> bytes_;
    std::size_t pos_ = 0;
    std::size_t max_depth_;
};

}  // namespace recon::stream::detail
