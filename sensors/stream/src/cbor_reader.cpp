// Pull parsing of CBOR with libcbor's streaming decoder (see cbor_reader.hpp).

#include "cbor_reader.hpp"

#include <cbor.h>

#include <cstdio>

#include "stream/errors.hpp"

namespace recon::stream::detail {
namespace {

Token& token_of(void* context) { return *static_cast<Token*>(context); }

template <TokenKind kind, typename T>
void on_int(void* context, T value)
{
    token_of(context).kind = kind;
    token_of(context).value = value;
}

template <TokenKind kind>
void on_string(void* context, cbor_data data, std::size_t length)
{
    token_of(context).kind = kind;
    token_of(context).data = {data, length};
}

template <TokenKind kind>
void on_simple(void* context)
{
    token_of(context).kind = kind;
    token_of(context).indefinite = true;
}

template <TokenKind kind>
void on_collection(void* context, std::size_t size)
{
    token_of(context).kind = kind;
    token_of(context).value = size;
}

template <typename T>
void on_float(void* context, T value)
{
    token_of(context).kind = TokenKind::floating;
    token_of(context).number = value;
}

void on_bool(void* context, bool value)
{
    token_of(context).kind = TokenKind::boolean;
    token_of(context).flag = value;
}

void on_null(void* context) { token_of(context).kind = TokenKind::null; }
void on_undefined(void* context) { token_of(context).kind = TokenKind::undefined; }
void on_break(void* context) { token_of(context).kind = TokenKind::brk; }

const cbor_callbacks callbacks = [] {
    cbor_callbacks c = cbor_empty_callbacks;
    c.uint8 = on_int<TokenKind::unsigned_int, std::uint8_t>;
    c.uint16 = on_int<TokenKind::unsigned_int, std::uint16_t>;
    c.uint32 = on_int<TokenKind::unsigned_int, std::uint32_t>;
    c.uint64 = on_int<TokenKind::unsigned_int, std::uint64_t>;
    c.negint8 = on_int<TokenKind::negative_int, std::uint8_t>;
    c.negint16 = on_int<TokenKind::negative_int, std::uint16_t>;
    c.negint32 = on_int<TokenKind::negative_int, std::uint32_t>;
    c.negint64 = on_int<TokenKind::negative_int, std::uint64_t>;
    c.byte_string = on_string<TokenKind::bytes>;
    c.byte_string_start = on_simple<TokenKind::bytes_start>;
    c.string = on_string<TokenKind::text>;
    c.string_start = on_simple<TokenKind::text_start>;
    c.array_start = on_collection<TokenKind::array>;
    c.indef_array_start = on_simple<TokenKind::array>;
    c.map_start = on_collection<TokenKind::map>;
    c.indef_map_start = on_simple<TokenKind::map>;
    c.tag = on_int<TokenKind::tag, std::uint64_t>;
    c.float2 = on_float<float>;
    c.float4 = on_float<float>;
    c.float8 = on_float<double>;
    c.boolean = on_bool;
    c.null = on_null;
    c.undefined = on_undefined;
    c.indef_break = on_break;
    return c;
}();

StreamError bad_field(const char* field, const std::string& what)
{
    return {ErrorKind::bad_field, std::string{field} + ": " + what};
}

}  // namespace

const char* to_string(TokenKind kind)
{
    switch (kind) {
    case TokenKind::unsigned_int: return "unsigned integer";
    case TokenKind::negative_int: return "negative integer";
    case TokenKind::bytes: return "byte string";
    case TokenKind::text: return "text string";
    case TokenKind::array: return "array";
    case TokenKind::map: return "map";
    case TokenKind::tag: return "tag";
    case TokenKind::floating: return "float";
    case TokenKind::boolean: return "boolean";
    case TokenKind::null: return "null";
    case TokenKind::undefined: return "undefined";
    case TokenKind::brk: return "break";
    case TokenKind::bytes_start: return "indefinite byte string";
    case TokenKind::text_start: return "indefinite text string";
    }
    return "item";
}

Token CborReader::next()
{
    if (pos_ >= bytes_.size()) {
        throw StreamError{ErrorKind::truncated, "CBOR: message ends at byte " +
                                                    std::to_string(pos_) + " inside an item"};
    }
    Token token;
    token.kind = TokenKind::brk;
    token.value = ~std::uint64_t{0};
    const cbor_decoder_result result =
        cbor_stream_decode(bytes_.data() + pos_, bytes_.size() - pos_, &callbacks, &token);
    if (result.status == CBOR_DECODER_NEDATA) {
        throw StreamError{ErrorKind::truncated,
                          "CBOR: item at byte " + std::to_string(pos_) + " needs " +
                              std::to_string(result.required) + " bytes, " +
                              std::to_string(bytes_.size() - pos_) + " left"};
    }
    if (result.status != CBOR_DECODER_FINISHED || result.read == 0) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02x", bytes_[pos_]);
        throw StreamError{ErrorKind::malformed_cbor, "CBOR: invalid item head " + std::string{byte} +
                                                         " at byte " + std::to_string(pos_)};
    }
    if (token.kind == TokenKind::brk && bytes_[pos_] != 0xff) {
        // A head no callback claimed (e.g. an unassigned simple value).
        throw StreamError{ErrorKind::malformed_cbor,
                          "CBOR: unsupported item at byte " + std::to_string(pos_)};
    }
    pos_ += result.read;
    return token;
}

bool CborReader::at_break()
{
    if (pos_ < bytes_.size() && bytes_[pos_] == 0xff) {
        ++pos_;
        return true;
    }
    return false;
}

void CborReader::check_depth(std::size_t depth) const
{
    if (depth > max_depth_) {
        throw StreamError{ErrorKind::size_limit, "CBOR: nesting deeper than " +
                                                     std::to_string(max_depth_) + " at byte " +
                                                     std::to_string(pos_)};
    }
}

void CborReader::skip(std::size_t depth) { skip_rest(next(), depth); }

void CborReader::skip_rest(const Token& token, std::size_t depth)
{
    check_depth(depth);
    switch (token.kind) {
    case TokenKind::array:
    case TokenKind::map: {
        const std::uint64_t per_entry = token.kind == TokenKind::map ? 2 : 1;
        if (token.indefinite) {
            while (!at_break()) skip(depth + 1);
        } else {
            // Each item takes at least one byte, so a lying count ends in
            // `truncated` after at most the remaining bytes.
            for (std::uint64_t i = 0; i < token.value; ++i) {
                for (std::uint64_t j = 0; j < per_entry; ++j) skip(depth + 1);
            }
        }
        break;
    }
    case TokenKind::tag: skip(depth + 1); break;
    case TokenKind::bytes_start:
    case TokenKind::text_start:
        while (!at_break()) {
            const Token chunk = next();
            const auto want = token.kind == TokenKind::bytes_start ? TokenKind::bytes : TokenKind::text;
            if (chunk.kind != want) {
                throw StreamError{ErrorKind::malformed_cbor,
                                  "CBOR: indefinite string holds a " +
                                      std::string{to_string(chunk.kind)} + " chunk"};
            }
        }
        break;
    case TokenKind::brk:
        throw StreamError{ErrorKind::malformed_cbor,
                          "CBOR: unexpected break at byte " + std::to_string(pos_ - 1)};
    default: break;
    }
}

void CborReader::expect(const Token& token, TokenKind kind, const char* field)
{
    if (token.kind != kind) {
        throw bad_field(field, std::string{"expected "} + to_string(kind) + ", found " +
                                   to_string(token.kind));
    }
}

std::uint64_t CborReader::read_uint(const char* field)
{
    const Token token = next();
    expect(token, TokenKind::unsigned_int, field);
    return token.value;
}

std::int64_t CborReader::read_int(const char* field)
{
    const Token token = next();
    if (token.kind == TokenKind::unsigned_int && token.value <= INT64_MAX) {
        return static_cast<std::int64_t>(token.value);
    }
    if (token.kind == TokenKind::negative_int && token.value < INT64_MAX) {
        return -1 - static_cast<std::int64_t>(token.value);
    }
    throw bad_field(field, std::string{"expected a 64-bit integer, found "} + to_string(token.kind));
}

double CborReader::read_number(const char* field)
{
    const Token token = next();
    if (token.kind == TokenKind::floating) return token.number;
    if (token.kind == TokenKind::unsigned_int) return static_cast<double>(token.value);
    if (token.kind == TokenKind::negative_int) return -1.0 - static_cast<double>(token.value);
    throw bad_field(field, std::string{"expected a number, found "} + to_string(token.kind));
}

std::string CborReader::read_text(const char* field)
{
    const Token token = next();
    if (token.kind == TokenKind::text) return {token.data.begin(), token.data.end()};
    expect(token, TokenKind::text_start, field);
    std::string text;
    while (!at_break()) {
        const Token chunk = next();
        expect(chunk, TokenKind::text, field);
        text.append(chunk.data.begin(), chunk.data.end());
    }
    return text;
}

std::vector<std::uint8_t> CborReader::read_bytes(const char* field)
{
    const Token token = next();
    if (token.kind == TokenKind::bytes) return {token.data.begin(), token.data.end()};
    expect(token, TokenKind::bytes_start, field);
    std::vector<std::uint8_t> bytes;
    while (!at_break()) {
        const Token chunk = next();
        expect(chunk, TokenKind::bytes, field);
        bytes.insert(bytes.end(), chunk.data.begin(), chunk.data.end());
    }
    return bytes;
}

std::uint64_t CborReader::read_array_head(const char* field)
{
    const Token token = next();
    expect(token, TokenKind::array, field);
    if (token.indefinite) throw bad_field(field, "indefinite-length array not supported here");
    return token.value;
}

}  // namespace recon::stream::detail
