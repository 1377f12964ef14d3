#pragma once
// Bitshuffle (Masui et al. 2015) and the two compressed encodings of DECTRIS
// Stream V2 (tag 56500): "bslz4", the framing of the bitshuffle HDF5 filter
// (filter id 32008), and "lz4", one plain LZ4 block.
//
// Bitshuffle of n elements of s bytes: the array is cut into blocks of
// block_size elements (a multiple of 8); within a block of b elements the
// output holds 8*s bit planes of b/8 bytes each, plane p carrying bit p of
// every element (bit p%8 of byte p/8, little-endian), element i at bit i%8
// of byte i/8 of the plane. Elements past the last multiple of 8 are copied
// unchanged.
//
// bslz4 framing (all integers big-endian):
//   u64 uncompressed size in bytes, u32 block size in BYTES (elements * s),
//   then per block (full blocks, then one partial block rounded down to a
//   multiple of 8 elements): u32 compressed size, LZ4 block of the
//   bit-transposed block; then the trailing (n % 8) elements raw.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace recon::stream {

/// Default block size in elements: 8192 bytes / elem_size, rounded down to a
/// multiple of 8, at least 128 (the bitshuffle library's choice).
std::size_t default_block_size(std::size_t elem_size);

/// Bit-transposes one block: `in` holds `count` elements of elem_size bytes,
/// count a multiple of 8; `out` the same size.
void bit_transpose_block(const std::uint8_t* in, std::uint8_t* out, std::size_t count,
                         std::size_t elem_size);
/// The inverse of bit_transpose_block.
void bit_untranspose_block(const std::uint8_t* in, std::uint8_t* out, std::size_t count,
                           std::size_t elem_size);

/// Bitshuffles a whole array (blocks of block_size elements; 0: default).
std::vector<std::uint8_t> bitshuffle(std::span<const std::uint8_t> data, std::size_t elem_size,
                                     std::size_t block_size = 0);
/// The inverse of bitshuffle.
std::vector<std::uint8_t> bitunshuffle(std::span<const std::uint8_t> data, std::size_t elem_size,
                                       std::size_t block_size = 0);

/// Encodes `data` (elements of elem_size bytes) as a bslz4 stream.
std::vector<std::uint8_t> compress_bslz4(std::span<const std::uint8_t> data,
                                         std::size_t elem_size, std::size_t block_size = 0);
/// Decodes a bslz4 stream whose decompressed size must be exactly
/// `expected_bytes` (from the array's shape and dtype, checked against the
/// caller's limit before this is called). Throws StreamError (corrupt_data,
/// truncated, shape_mismatch) with a one-line reason; never writes or
/// allocates beyond expected_bytes.
std::vector<std::uint8_t> decompress_bslz4(std::span<const std::uint8_t> stream,
                                           std::size_t elem_size, std::size_t expected_bytes);

/// One plain LZ4 block.
std::vector<std::uint8_t> compress_lz4(std::span<const std::uint8_t> data);
/// Decodes one LZ4 block that must expand to exactly expected_bytes.
std::vector<std::uint8_t> decompress_lz4(std::span<const std::uint8_t> block,
                                         std::size_t expected_bytes);

}  // namespace recon::stream
