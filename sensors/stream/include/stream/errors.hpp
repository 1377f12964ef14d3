#pragma once
// Typed decode errors of the Stream V2 receiver: each bad message becomes one
// StreamError whose what() is a one-line reason and whose kind() names the
// counter it is charged to.

#include <stdexcept>
#include <string>

namespace recon::stream {

enum class ErrorKind {
    malformed_cbor,         // not well-formed CBOR, or trailing bytes
    truncated,              // the message ends inside an item
    missing_self_describe,  // no leading tag 55799 (d9 d9 f7)
    unknown_message_type,   // `type` is not start | image | end
    bad_field,              // a known key with the wrong CBOR type or value
    unsupported_dtype,      // a typed-array tag other than u8/u16/u32/f32 LE
    unsupported_compression,
    corrupt_data,           // LZ4 / bslz4 stream that does not decode
    size_limit,             // over a configured limit (decompression bomb guard)
    shape_mismatch,         // shape product disagrees with the data size
};

/// Stable snake_case name of a kind (metric label, log field).
const char* to_string(ErrorKind kind);

class StreamError : public std::runtime_error {
public:
    StreamError(ErrorKind kind, const std::string& reason)
        : std::runtime_error{reason}, kind_{kind} {}
    ErrorKind kind() const { return kind_; }

private:
    ErrorKind kind_;
};

}  // namespace recon::stream
