// Bitshuffle, bslz4 and lz4 against hand-computed vectors and an independent
// bit-by-bit reference.

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "stream/bitshuffle.hpp"
#include "stream/errors.hpp"

namespace recon::stream {
namespace {

using Bytes = std::vector<std::uint8_t>;

/// The definition, one bit at a time: in a block of `count` elements, plane
/// p = 8*byte + bit holds that bit of element i at bit i%8 of byte i/8.
Bytes reference_transpose(const Bytes& in, std::size_t elem_size)
{
    const std::size_t count = in.size() / elem_size;
    Bytes out(in.size(), 0);
    for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t p = 0; p < 8 * elem_size; ++p) {
            const int bit = (in[i * elem_size + p / 8] >> (p % 8)) & 1;
            out[p * (count / 8) + i / 8] |= static_cast<std::uint8_t>(bit << (i % 8));
        }
    }
    return out;
}

Bytes random_bytes(std::size_t n, unsigned seed)
{
    std::mt19937 rng{seed};
    std::uniform_int_distribution<int> dist{0, 255};
    Bytes out(n);
    for (auto& b : out) b = static_cast<std::uint8_t>(dist(rng));
    return out;
}

ErrorKind kind_of(const std::function<void()>& fn)
{
    try {
        fn();
    } catch (const StreamError& e) {
        EXPECT_EQ(std::string{e.what()}.find('\n'), std::string::npos) << "one line";
        return e.kind();
    }
    ADD_FAILURE() << "no StreamError thrown";
    return ErrorKind::malformed_cbor;
}

TEST(Bitshuffle, DefaultBlockSizeFollowsTheLibrary)
{
    EXPECT_EQ(default_block_size(1), 8192u);
    EXPECT_EQ(default_block_size(2), 4096u);
    EXPECT_EQ(default_block_size(4), 2048u);
    EXPECT_EQ(default_block_size(3), 2728u);  // 2730 rounded down to a multiple of 8
    EXPECT_EQ(default_block_size(128), 128u);  // 64, raised to the minimum
}

TEST(Bitshuffle, HandComputedBytes)
{
    // Values 1..8: bit 0 set in elements 0,2,4,6 -> 0x55; bit 1 in 1,2,5,6 ->
    // 0x66; bit 2 in 3,4,5,6 -> 0x78; bit 3 in element 7 -> 0x80.
    const Bytes in{1, 2, 3, 4, 5, 6, 7, 8};
    const Bytes expected{0x55, 0x66, 0x78, 0x80, 0, 0, 0, 0};
    EXPECT_EQ(bitshuffle(in, 1), expected);
    EXPECT_EQ(bitunshuffle(expected, 1), in);
}

TEST(Bitshuffle, HandComputedU16)
{
    // Little-endian u16: 0x0001 (element 0), 0x0100 (element 1), 0x8000
    // (element 7). Planes 0..15 of one byte each: plane 0 -> 0x01, plane 8
    // (bit 0 of the high byte) -> 0x02, plane 15 -> 0x80.
    const Bytes in{0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x80};
    Bytes expected(16, 0);
    expected[0] = 0x01;
    expected[8] = 0x02;
    expected[15] = 0x80;
    EXPECT_EQ(bitshuffle(in, 2), expected);
    EXPECT_EQ(bitunshuffle(expected, 2), in);
}

TEST(Bitshuffle, TrailingElementsAreCopied)
{
    const Bytes in{1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB};
    const Bytes expected{0x55, 0x66, 0x78, 0x80, 0, 0, 0, 0, 0xAA, 0xBB};
    EXPECT_EQ(bitshuffle(in, 1), expected);
}

TEST(Bitshuffle, MatchesTheBitByBitReferencePerBlock)
{
    for (std::size_t elem_size : {1u, 2u, 4u, 8u}) {
        for (std::size_t n : {8u, 64u, 200u, 203u}) {
            const std::size_t block = 16;  // several blocks, a partial one, a tail
            const Bytes in = random_bytes(n * elem_size, static_cast<unsigned>(n * 31 + elem_size));
            const Bytes out = bitshuffle(in, elem_size, block);
            std::size_t done = 0;
            while (n - done >= 8) {
                std::size_t count = std::min(block, n - done);
                count -= count % 8;
                const Bytes part(in.begin() + done * elem_size,
                                 in.begin() + (done + count) * elem_size);
                const Bytes want = reference_transpose(part, elem_size);
                EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin() + done * elem_size))
                    << "elem_size " << elem_size << " n " << n << " block at " << done;
                done += count;
            }
            EXPECT_TRUE(std::equal(in.begin() + done * elem_size, in.end(),
                                   out.begin() + done * elem_size));
            EXPECT_EQ(bitunshuffle(out, elem_size, block), in);
        }
    }
}

TEST(Bslz4, DecodesAHandBuiltStream)
{
    // 10 u8 elements: header (size 10, block 8192 bytes), one block of 8
    // elements as a literal-only LZ4 block (token 0x80), then 2 raw bytes.
    const Bytes stream{0, 0, 0, 0, 0, 0, 0, 10,  0, 0, 0x20, 0,  0, 0, 0, 9,
                       0x80, 0x55, 0x66, 0x78, 0x80, 0, 0, 0, 0,  0xAA, 0xBB};
    EXPECT_EQ(decompress_bslz4(stream, 1, 10), (Bytes{1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB}));
}

TEST(Bslz4, HeaderAndRoundTrip)
{
    for (std::size_t elem_size : {1u, 2u, 4u}) {
        for (std::size_t n : {0u, 5u, 8u, 4097u, 20000u}) {
            Bytes in = random_bytes(n * elem_size, static_cast<unsigned>(n + elem_size));
            for (std::size_t i = 0; i < in.size(); i += 3) in[i] &= 0x0f;  // some redundancy
            const Bytes stream = compress_bslz4(in, elem_size);
            ASSERT_GE(stream.size(), 12u);
            std::uint64_t total = 0;
            for (int i = 0; i < 8; ++i) total = (total << 8) | stream[i];
            std::uint32_t block = 0;
            for (int i = 8; i < 12; ++i) block = (block << 8) | stream[i];
            EXPECT_EQ(total, in.size());
            EXPECT_EQ(block, default_block_size(elem_size) * elem_size);
            EXPECT_EQ(decompress_bslz4(stream, elem_size, in.size()), in);
        }
    }
}

TEST(Bslz4, BadStreamsAreTypedErrors)
{
    const Bytes in = random_bytes(2 * 1000, 7);
    const Bytes good = compress_bslz4(in, 2, 64);
    EXPECT_EQ(kind_of([&] { decompress_bslz4(Bytes(good.begin(), good.begin() + 7), 2, in.size()); }),
              ErrorKind::truncated);
    // The header must agree with the shape: a bomb claiming more is refused.
    EXPECT_EQ(kind_of([&] { decompress_bslz4(good, 2, in.size() + 2); }), ErrorKind::shape_mismatch);
    Bytes bomb = good;
    bomb[0] = 0x7f;
    EXPECT_EQ(kind_of([&] { decompress_bslz4(bomb, 2, in.size()); }), ErrorKind::shape_mismatch);
    Bytes bad_block = good;
    bad_block[11] = 3;  // 3 bytes is not whole u16 elements
    EXPECT_EQ(kind_of([&] { decompress_bslz4(bad_block, 2, in.size()); }), ErrorKind::corrupt_data);
    EXPECT_EQ(kind_of([&] { decompress_bslz4(Bytes(good.begin(), good.end() - 5), 2, in.size()); }),
              ErrorKind::truncated);
    Bytes trailing = good;
    trailing.push_back(0);
    EXPECT_EQ(kind_of([&] { decompress_bslz4(trailing, 2, in.size()); }), ErrorKind::corrupt_data);
    Bytes lying = good;
    lying[15] = static_cast<std::uint8_t>(lying[15] - 1);  // first block one byte shorter
    EXPECT_EQ(kind_of([&] { decompress_bslz4(lying, 2, in.size()); }), ErrorKind::corrupt_data);
}

TEST(Lz4, DecodesAHandBuiltBlock)
{
    // Token 0x30: 3 literals "abc", match offset 3 length 4 -> "abcabca";
    // token 0xC0: 12 literals, the last sequence.
    Bytes block{0x30, 'a', 'b', 'c', 0x03, 0x00, 0xC0};
    for (char c : std::string{"bcabcabcabcx"}) block.push_back(static_cast<std::uint8_t>(c));
    const Bytes out = decompress_lz4(block, 19);
    EXPECT_EQ(std::string(out.begin(), out.end()), "abcabcabcabcabcabcx");
    EXPECT_EQ(kind_of([&] { decompress_lz4(block, 18); }), ErrorKind::corrupt_data);
    EXPECT_EQ(kind_of([&] { decompress_lz4(block, 20); }), ErrorKind::corrupt_data);
    Bytes bad_offset = block;
    bad_offset[4] = 0x09;  // points before the start of the output
    EXPECT_EQ(kind_of([&] { decompress_lz4(bad_offset, 19); }), ErrorKind::corrupt_data);
}

TEST(Lz4, RoundTripAndCorruption)
{
    Bytes in = random_bytes(50000, 3);
    for (std::size_t i = 0; i < in.size(); i += 2) in[i] = 0;
    const Bytes block = compress_lz4(in);
    EXPECT_LT(block.size(), in.size());
    EXPECT_EQ(decompress_lz4(block, in.size()), in);
    EXPECT_EQ(kind_of([&] { decompress_lz4(Bytes(block.begin(), block.begin() + 100), in.size()); }),
              ErrorKind::corrupt_data);
}

}  // namespace
}  // namespace recon::stream
