// Bitshuffle: bit transposition within blocks of elements (see bitshuffle.hpp).

#include "stream/bitshuffle.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace recon::stream {
namespace {

constexpr std::size_t target_block_bytes = 8192;
constexpr std::size_t block_multiple = 8;
constexpr std::size_t min_block_size = 128;

/// Transposes the 8x8 bit matrix held in x, byte j = row j, bit k = column k
/// (Hacker's Delight 7-3); its own inverse.
std::uint64_t transpose_8x8(std::uint64_t x)
{
    std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    return x ^ t ^ (t << 28);
}

void check_block(std::size_t count, std::size_t elem_size)
{
    if (count % block_multiple != 0 || elem_size == 0) {
        throw std::invalid_argument{"bitshuffle: block of " + std::to_string(count) +
                                    " elements of " + std::to_string(elem_size) +
                                    " bytes (needs a multiple of 8 elements)"};
    }
}

/// Applies `block_fn(in, out, count)` over the blocks of an array and copies
/// the trailing (n % 8) elements unchanged.
template <typename BlockFn>
std::vector<std::uint8_t> over_blocks(std::span<const std::uint8_t> data, std::size_t elem_size,
                                      std::size_t block_size, BlockFn block_fn)
{
    if (elem_size == 0 || data.size() % elem_size != 0) {
        throw std::invalid_argument{"bitshuffle: " + std::to_string(data.size()) +
                                    " bytes is not a whole number of " +
                                    std::to_string(elem_size) + "-byte elements"};
    }
    if (block_size == 0) block_size = default_block_size(elem_size);
    check_block(block_size, elem_size);
    std::vector<std::uint8_t> out(data.size());
    const std::size_t n = data.size() / elem_size;
    std::size_t done = 0;
    while (n - done >= block_multiple) {
        std::size_t count = std::min(block_size, n - done);
        count -= count % block_multiple;
        block_fn(data.data() + done * elem_size, out.data() + done * elem_size, count);
        done += count;
    }
    std::memcpy(out.data() + done * elem_size, data.data() + done * elem_size,
                (n - done) * elem_size);
    return out;
}

}  // namespace

std::size_t default_block_size(std::size_t elem_size)
{
    std::size_t size = target_block_bytes / std::max<std::size_t>(elem_size, 1);
    size -= size % block_multiple;
    return std::max(size, min_block_size);
}

void bit_transpose_block(const std::uint8_t* in, std::uint8_t* out, std::size_t count,
                         std::size_t elem_size)
{
    check_block(count, elem_size);
    const std::size_t plane_bytes = count / 8;
    for (std::size_t b = 0; b < elem_size; ++b) {
        for (std::size_t g = 0; g < plane_bytes; ++g) {
            // Row j of the 8x8 matrix: byte b of element 8g + j.
            std::uint64_t x = 0;
            for (std::size_t j = 0; j < 8; ++j) {
                x |= std::uint64_t{in[(8 * g + j) * elem_size + b]} << (8 * j);
            }
            x = transpose_8x8(x);
            // Row k now holds bit k of the 8 elements: plane 8b + k.
            for (std::size_t k = 0; k < 8; ++k) {
                out[(8 * b + k) * plane_bytes + g] = static_cast<std::uint8_t>(x >> (8 * k));
            }
        }
    }
}

void bit_untranspose_block(const std::uint8_t* in, std::uint8_t* out, std::size_t count,
                           std::size_t elem_size)
{
    check_block(count, elem_size);
    const std::size_t plane_bytes = count / 8;
    for (std::size_t b = 0; b < elem_size; ++b) {
        for (std::size_t g = 0; g < plane_bytes; ++g) {
            std::uint64_t x = 0;
            for (std::size_t k = 0; k < 8; ++k) {
                x |= std::uint64_t{in[(8 * b + k) * plane_bytes + g]} << (8 * k);
            }
            x = transpose_8x8(x);
            for (std::size_t j = 0; j < 8; ++j) {
                out[(8 * g + j) * elem_size + b] = static_cast<std::uint8_t>(x >> (8 * j));
            }
        }
    }
}

std::vector<std::uint8_t> bitshuffle(std::span<const std::uint8_t> data, std::size_t elem_size,
                                     std::size_t block_size)
{
    return over_blocks(data, elem_size, block_size,
                       [&](const std::uint8_t* in, std::uint8_t* out, std::size_t count) {
                           bit_transpose_block(in, out, count, elem_size);
                       });
}

std::vector<std::uint8_t> bitunshuffle(std::span<const std::uint8_t> data, std::size_t elem_size,
                                       std::size_t block_size)
{
    return over_blocks(data, elem_size, block_size,
                       [&](const std::uint8_t* in, std::uint8_t* out, std::size_t count) {
                           bit_untranspose_block(in, out, count, elem_size);
                       });
}

}  // namespace recon::stream
