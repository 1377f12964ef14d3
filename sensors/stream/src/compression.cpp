// bslz4 and lz4 encodings of Stream V2 arrays (see bitshuffle.hpp).

#include <lz4.h>

#include <climits>
#include <cstring>
#include <string>

#include "stream/bitshuffle.hpp"
#include "stream/errors.hpp"

namespace recon::stream {
namespace {

constexpr std::size_t header_bytes = 12;  // u64 total size, u32 block size

void put_be(std::vector<std::uint8_t>& out, std::uint64_t value, int bytes)
{
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

std::uint64_t get_be(const std::uint8_t* p, int bytes)
{
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value = (value << 8) | p[i];
    return value;
}

/// Appends one LZ4 block of `size` bytes, preceded by its u32 BE size.
void append_lz4_block(std::vector<std::uint8_t>& out, const std::uint8_t* in, std::size_t size)
{
    const int bound = LZ4_compressBound(static_cast<int>(size));
    const std::size_t at = out.size();
    out.resize(at + 4 + static_cast<std::size_t>(bound));
    const int written = LZ4_compress_default(reinterpret_cast<const char*>(in),
                                             reinterpret_cast<char*>(out.data() + at + 4),
                                             static_cast<int>(size), bound);
    if (written <= 0) throw std::runtime_error{"lz4: compression failed"};
    out.resize(at + 4 + static_cast<std::size_t>(written));
    for (int i = 0; i < 4; ++i) out[at + i] = static_cast<std::uint8_t>(written >> (8 * (3 - i)));
}

StreamError corrupt(const std::string& what) { return {ErrorKind::corrupt_data, what}; }

}  // namespace

std::vector<std::uint8_t> compress_bslz4(std::span<const std::uint8_t> data, std::size_t elem_size,
                                         std::size_t block_size)
{
    if (block_size == 0) block_size = default_block_size(elem_size);
    if (elem_size == 0 || data.size() % elem_size != 0 || block_size % 8 != 0 ||
        block_size * elem_size > INT_MAX) {
        throw std::invalid_argument{"bslz4: bad element size or block size"};
    }
    std::vector<std::uint8_t> out;
    put_be(out, data.size(), 8);
    put_be(out, block_size * elem_size, 4);
    const std::size_t n = data.size() / elem_size;
    std::vector<std::uint8_t> shuffled(block_size * elem_size);
    std::size_t done = 0;
    while (n - done >= 8) {
        std::size_t count = std::min(block_size, n - done);
        count -= count % 8;
        bit_transpose_block(data.data() + done * elem_size, shuffled.data(), count, elem_size);
        append_lz4_block(out, shuffled.data(), count * elem_size);
        done += count;
    }
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(done * elem_size), data.end());
    return out;
}

std::vector<std::uint8_t> decompress_bslz4(std::span<const std::uint8_t> stream,
                                           std::size_t elem_size, std::size_t expected_bytes)
{
    if (stream.size() < header_bytes) {
        throw StreamError{ErrorKind::truncated, "bslz4: stream of " + std::to_string(stream.size()) +
                                                    " bytes is shorter than its 12-byte header"};
    }
    const std::uint64_t total = get_be(stream.data(), 8);
    const std::uint64_t block_bytes = get_be(stream.data() + 8, 4);
    if (total != expected_bytes) {
        throw StreamError{ErrorKind::shape_mismatch,
                          "bslz4: header says " + std::to_string(total) +
                              " bytes, shape and dtype say " + std::to_string(expected_bytes)};
    }
    if (elem_size == 0 || expected_bytes % elem_size != 0 || block_bytes == 0 ||
        block_bytes % elem_size != 0 || (block_bytes / elem_size) % 8 != 0 || block_bytes > INT_MAX) {
        throw corrupt("bslz4: block size " + std::to_string(block_bytes) + " bytes is invalid for " +
                      std::to_string(elem_size) + "-byte elements");
    }
    const std::size_t block_size = block_bytes / elem_size;
    const std::size_t n = expected_bytes / elem_size;
    std::vector<std::uint8_t> out(expected_bytes);
    std::vector<std::uint8_t> shuffled(std::min<std::size_t>(block_bytes, expected_bytes));
    std::size_t pos = header_bytes;
    std::size_t done = 0;
    while (n - done >= 8) {
        std::size_t count = std::min(block_size, n - done);
        count -= count % 8;
        const std::size_t bytes = count * elem_size;
        if (stream.size() - pos < 4) {
            throw StreamError{ErrorKind::truncated, "bslz4: stream ends before block at element " +
                                                        std::to_string(done)};
        }
        const std::uint64_t compressed = get_be(stream.data() + pos, 4);
        pos += 4;
        if (compressed > stream.size() - pos) {
            throw StreamError{ErrorKind::truncated,
                              "bslz4: block at element " + std::to_string(done) + " claims " +
                                  std::to_string(compressed) + " bytes, " +
                                  std::to_string(stream.size() - pos) + " left"};
        }
        const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(stream.data() + pos),
                                            reinterpret_cast<char*>(shuffled.data()),
                                            static_cast<int>(compressed), static_cast<int>(bytes));
        if (got != static_cast<int>(bytes)) {
            throw corrupt("bslz4: LZ4 block at element " + std::to_string(done) +
                          " does not decode to " + std::to_string(bytes) + " bytes");
        }
        bit_untranspose_block(shuffled.data(), out.data() + done * elem_size, count, elem_size);
        pos += compressed;
        done += count;
    }
    const std::size_t tail = (n - done) * elem_size;
    if (stream.size() - pos != tail) {
        throw corrupt("bslz4: " + std::to_string(stream.size() - pos) +
                      " bytes after the last block, expected " + std::to_string(tail));
    }
    std::memcpy(out.data() + done * elem_size, stream.data() + pos, tail);
    return out;
}

std::vector<std::uint8_t> compress_lz4(std::span<const std::uint8_t> data)
{
    if (data.size() > INT_MAX) throw std::invalid_argument{"lz4: input over 2 GiB"};
    std::vector<std::uint8_t> out;
    append_lz4_block(out, data.data(), data.size());
    out.erase(out.begin(), out.begin() + 4);  // plain block: no size prefix
    return out;
}

std::vector<std::uint8_t> decompress_lz4(std::span<const std::uint8_t> block,
                                         std::size_t expected_bytes)
{
    if (expected_bytes > INT_MAX || block.size() > INT_MAX) {
        throw StreamError{ErrorKind::size_limit, "lz4: block over 2 GiB"};
    }
    std::vector<std::uint8_t> out(expected_bytes);
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(block.data()),
                                        reinterpret_cast<char*>(out.data()),
                                        static_cast<int>(block.size()),
                                        static_cast<int>(expected_bytes));
    if (got != static_cast<int>(expected_bytes)) {
        throw corrupt("lz4: block of " + std::to_string(block.size()) +
                      " bytes does not decode to the " + std::to_string(expected_bytes) +
                      " bytes its shape says" + (got < 0 ? " (corrupt)" : ""));
    }
    return out;
}

}  // namespace recon::stream
