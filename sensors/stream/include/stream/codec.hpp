#pragma once
// CBOR encoding and strict decoding of Stream V2 messages: one CBOR map with
// the self-describe tag 55799, first key `type`. Decoding never trusts a
// length it has not checked against the bytes present and the limits below.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "stream/errors.hpp"
#include "stream/messages.hpp"

namespace recon::stream {

/// Limits on what one message may make the receiver allocate or walk.
struct DecodeLimits {
    std::size_t max_array_bytes = std::size_t{256} << 20;  // one decompressed array
    std::size_t max_message_bytes = std::size_t{1} << 30;  // sum over a message's arrays
    std::size_t max_depth = 32;                            // nesting of skipped items
    std::size_t max_dims = 8;                              // rank of an array
};

/// Decodes one message; throws StreamError (kind + one-line reason).
Message decode_message(std::span<const std::uint8_t> bytes, const DecodeLimits& limits = {});

/// Encoding choices for arrays.
struct EncodeOptions {
    Compression compression = Compression::none;
    std::size_t block_size = 0;  // bslz4 block size in elements; 0: default
};

/// Encodes a message as Stream V2 CBOR (self-describe tag first).
std::vector<std::uint8_t> encode_message(const Message& message, const EncodeOptions& options = {});

}  // namespace recon::stream
