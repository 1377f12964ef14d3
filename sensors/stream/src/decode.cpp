// Strict decoding of Stream V2 messages (see codec.hpp).

#include <limits>
#include <string>

#include "cbor_reader.hpp"
#include "stream/bitshuffle.hpp"
#include "stream/codec.hpp"

namespace recon::stream {
namespace {

using detail::CborReader;
using detail::Token;
using detail::TokenKind;

constexpr std::uint64_t self_describe_tag = 55799;
constexpr std::uint64_t multi_dim_array_tag = 40;
constexpr std::uint64_t compression_tag = 56500;

std::string shape_text(const std::vector<std::uint64_t>& shape)
{
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ',';
        text += std::to_string(shape[i]);
    }
    text += ']';
    return text;
}

DType dtype_of_tag(std::uint64_t tag, const std::string& field)
{
    switch (tag) {
    case 64: return DType::u8;
    case 69: return DType::u16;
    case 70: return DType::u32;
    case 85: return DType::f32;
    default: break;
    }
    if (tag >= 64 && tag <= 87) {
        throw StreamError{ErrorKind::unsupported_dtype,
                          field + ": typed array tag " + std::to_string(tag) +
                              " is not supported (u8 64, u16 69, u32 70, f32 85)"};
    }
    throw StreamError{ErrorKind::bad_field,
                      field + ": expected a typed array tag, found tag " + std::to_string(tag)};
}

/// Decodes messages and keeps the running total of array bytes.
class MessageDecoder {
public:
    MessageDecoder(std::span<const std::uint8_t> bytes, const DecodeLimits& limits)
        : reader_{bytes, limits.max_depth}, limits_{limits} {}

    Message decode()
    {
        const Token tag = reader_.next();
        if (tag.kind != TokenKind::tag || tag.value != self_describe_tag) {
            throw StreamError{ErrorKind::missing_self_describe,
                              "message does not start with the CBOR self-describe tag d9 d9 f7"};
        }
        const Token head = reader_.next();
        CborReader::expect(head, TokenKind::map, "message");
        if (head.indefinite || head.value == 0) {
            throw StreamError{ErrorKind::bad_field, "message: expected a non-empty definite map"};
        }
        const Token key = reader_.next();
        if (key.kind != TokenKind::text || std::string{key.data.begin(), key.data.end()} != "type") {
            throw StreamError{ErrorKind::bad_field, "message: the first key must be `type`"};
        }
        const std::string type = reader_.read_text("type");
        Message message;
        if (type == "start") {
            message = decode_start(head.value - 1);
        } else if (type == "image") {
            message = decode_image(head.value - 1);
        } else if (type == "end") {
            message = decode_end(head.value - 1);
        } else {
            throw StreamError{ErrorKind::unknown_message_type,
                              "message type `" + type.substr(0, 64) + "` is not start, image or end"};
        }
        if (!reader_.at_end()) {
            throw StreamError{ErrorKind::malformed_cbor,
                              "message has trailing bytes after byte " +
                                  std::to_string(reader_.position())};
        }
        return message;
    }

private:
    /// Calls fn(key) for the remaining `count` entries of the top-level map.
    template <typename Fn>
    void for_remaining(std::uint64_t count, Fn&& fn)
    {
        for (std::uint64_t i = 0; i < count; ++i) {
            const Token key = reader_.next();
            if (key.kind == TokenKind::text) {
                fn(std::string{key.data.begin(), key.data.end()});
            } else {
                reader_.skip_rest(key, 1);
                reader_.skip(1);
            }
        }
    }

    StartMessage decode_start(std::uint64_t count)
    {
        StartMessage start;
        for_remaining(count, [&](const std::string& key) {
            if (key == "series_id") start.series_id = reader_.read_uint("start.series_id");
            else if (key == "series_unique_id") start.series_unique_id = reader_.read_text("start.series_unique_id");
            else if (key == "number_of_images") start.number_of_images = reader_.read_uint("start.number_of_images");
            else if (key == "image_size_x") start.image_size_x = reader_.read_uint("start.image_size_x");
            else if (key == "image_size_y") start.image_size_y = reader_.read_uint("start.image_size_y");
            else if (key == "image_dtype") start.image_dtype = reader_.read_text("start.image_dtype");
            else if (key == "frame_time") start.frame_time = reader_.read_number("start.frame_time");
            else if (key == "channels") start.channels = read_text_array("start.channels");
            else if (key == "flatfield") start.flatfield = read_channel_map("start.flatfield");
            else if (key == "user_data") read_start_user_data(start);
            else reader_.skip(1);
        });
        return start;
    }

    void read_start_user_data(StartMessage& start)
    {
        const std::size_t at = reader_.position();
        const Token head = reader_.next();
        if (head.kind != TokenKind::map) {  // user_data may be anything
            reader_.skip_rest(head, 1);
            return;
        }
        reader_.seek(at);
        reader_.for_each_entry("start.user_data", 1, [&](const std::string& key) {
            if (key == "darkfield") start.darkfield = read_channel_map("start.user_data.darkfield");
            else reader_.skip(2);
        });
    }

    ImageMessage decode_image(std::uint64_t count)
    {
        ImageMessage image;
        bool have_id = false, have_data = false;
        for_remaining(count, [&](const std::string& key) {
            if (key == "series_id") image.series_id = reader_.read_uint("image.series_id");
            else if (key == "series_unique_id") image.series_unique_id = reader_.read_text("image.series_unique_id");
            else if (key == "image_id") {
                image.image_id = reader_.read_uint("image.image_id");
                have_id = true;
            } else if (key == "data") {
                image.data = read_channel_map("image.data");
                have_data = true;
            } else if (key == "user_data") read_image_user_data(image);
            else reader_.skip(1);
        });
        if (!have_id) throw StreamError{ErrorKind::bad_field, "image: no `image_id`"};
        if (!have_data) throw StreamError{ErrorKind::bad_field, "image: no `data`"};
        return image;
    }

    void read_image_user_data(ImageMessage& image)
    {
        const std::size_t at = reader_.position();
        const Token head = reader_.next();
        if (head.kind != TokenKind::map) {
            reader_.skip_rest(head, 1);
            return;
        }
        reader_.seek(at);
        reader_.for_each_entry("image.user_data", 1, [&](const std::string& key) {
            if (key == "publish_time_ns") image.publish_time_ns = reader_.read_int("image.user_data.publish_time_ns");
            else reader_.skip(2);
        });
    }

    EndMessage decode_end(std::uint64_t count)
    {
        EndMessage end;
        for_remaining(count, [&](const std::string& key) {
            if (key == "series_id") end.series_id = reader_.read_uint("end.series_id");
            else if (key == "series_unique_id") end.series_unique_id = reader_.read_text("end.series_unique_id");
            else reader_.skip(1);
        });
        return end;
    }

    std::vector<std::string> read_text_array(const char* field)
    {
        const std::uint64_t n = reader_.read_array_head(field);
        std::vector<std::string> out;
        for (std::uint64_t i = 0; i < n; ++i) out.push_back(reader_.read_text(field));
        return out;
    }

    std::map<std::string, MultiDimArray> read_channel_map(const char* field)
    {
        std::map<std::string, MultiDimArray> out;
        reader_.for_each_entry(field, 1, [&](const std::string& channel) {
            out[channel] = read_array(std::string{field} + "." + channel);
        });
        return out;
    }

    MultiDimArray read_array(const std::string& field)
    {
        const Token tag = reader_.next();
        if (tag.kind != TokenKind::tag || tag.value != multi_dim_array_tag) {
            throw StreamError{ErrorKind::bad_field,
                              field + ": expected a multi-dimensional array (tag 40), found " +
                                  (tag.kind == TokenKind::tag ? "tag " + std::to_string(tag.value)
                                                              : detail::to_string(tag.kind))};
        }
        if (reader_.read_array_head(field.c_str()) != 2) {
            throw StreamError{ErrorKind::bad_field, field + ": tag 40 needs [shape, data]"};
        }
        MultiDimArray array;
        array.shape = read_shape(field);
        const Token typed = reader_.next();
        CborReader::expect(typed, TokenKind::tag, field.c_str());
        array.dtype = dtype_of_tag(typed.value, field);
        const std::size_t expected = checked_bytes(array.shape, array.dtype, field);
        array.bytes = read_payload(field, array.dtype, expected);
        return array;
    }

    std::vector<std::uint64_t> read_shape(const std::string& field)
    {
        const std::uint64_t rank = reader_.read_array_head(field.c_str());
        if (rank == 0 || rank > limits_.max_dims) {
            throw StreamError{ErrorKind::bad_field, field + ": rank " + std::to_string(rank) +
                                                        " (expected 1.." +
                                                        std::to_string(limits_.max_dims) + ")"};
        }
        std::vector<std::uint64_t> shape(rank);
        for (auto& d : shape) d = reader_.read_uint(field.c_str());
        return shape;
    }

    /// Bytes the array must decode to; throws size_limit before anything is
    /// allocated when the shape asks for more than the limits allow.
    std::size_t checked_bytes(const std::vector<std::uint64_t>& shape, DType dtype,
                              const std::string& field)
    {
        std::uint64_t bytes = element_size(dtype);
        bool overflow = false;
        for (auto d : shape) {
            if (d != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
            bytes *= d;
        }
        if (overflow || bytes > limits_.max_array_bytes) {
            throw StreamError{ErrorKind::size_limit,
                              field + ": shape " + shape_text(shape) + " " + to_string(dtype) +
                                  (overflow ? " overflows" : " is " + std::to_string(bytes) + " bytes") +
                                  ", over the limit of " + std::to_string(limits_.max_array_bytes)};
        }
        total_bytes_ += bytes;
        if (total_bytes_ > limits_.max_message_bytes) {
            throw StreamError{ErrorKind::size_limit,
                              field + ": arrays of this message exceed " +
                                  std::to_string(limits_.max_message_bytes) + " bytes"};
        }
        return static_cast<std::size_t>(bytes);
    }

    std::vector<std::uint8_t> read_payload(const std::string& field, DType dtype, std::size_t expected)
    {
        const std::size_t at = reader_.position();
        const Token head = reader_.next();
        if (head.kind != TokenKind::tag) {
            reader_.seek(at);
            std::vector<std::uint8_t> bytes = reader_.read_bytes(field.c_str());
            if (bytes.size() != expected) {
                throw StreamError{ErrorKind::shape_mismatch,
                                  field + ": " + std::to_string(bytes.size()) +
                                      " data bytes, shape and dtype say " + std::to_string(expected)};
            }
            return bytes;
        }
        if (head.value != compression_tag) {
            throw StreamError{ErrorKind::bad_field, field + ": unexpected tag " +
                                                        std::to_string(head.value) +
                                                        " over the array data"};
        }
        if (reader_.read_array_head(field.c_str()) != 3) {
            throw StreamError{ErrorKind::bad_field,
                              field + ": compression (tag 56500) needs [algorithm, elem_size, bytes]"};
        }
        const std::string algorithm = reader_.read_text(field.c_str());
        const std::uint64_t elem_size = reader_.read_uint(field.c_str());
        const std::vector<std::uint8_t> encoded = reader_.read_bytes(field.c_str());
        try {
            if (algorithm == "lz4") return decompress_lz4(encoded, expected);
            if (algorithm == "bslz4") {
                if (elem_size != element_size(dtype)) {
                    throw StreamError{ErrorKind::bad_field,
                                      "bslz4 element size " + std::to_string(elem_size) +
                                          " disagrees with dtype " + to_string(dtype)};
                }
                return decompress_bslz4(encoded, elem_size, expected);
            }
        } catch (const StreamError& e) {
            throw StreamError{e.kind(), field + ": " + e.what()};
        }
        throw StreamError{ErrorKind::unsupported_compression,
                          field + ": compression `" + algorithm.substr(0, 32) +
                              "` is not supported (bslz4, lz4)"};
    }

    CborReader reader_;
    DecodeLimits limits_;
    std::size_t total_bytes_ = 0;
};

}  // namespace

Message decode_message(std::span<const std::uint8_t> bytes, const DecodeLimits& limits)
{
    return MessageDecoder{bytes, limits}.decode();
}

}  // namespace recon::stream
