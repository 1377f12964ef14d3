// CBOR encoding of Stream V2 messages with libcbor's encoders (see codec.hpp).

#include <cbor.h>

#include <cstring>
#include <string>

#include "stream/bitshuffle.hpp"
#include "stream/codec.hpp"

namespace recon::stream {
namespace {

class CborWriter {
public:
    explicit CborWriter(std::vector<std::uint8_t>& out) : out_{out} {}

    void tag(std::uint64_t value) { head(cbor_encode_tag, value); }
    void map(std::size_t entries) { head(cbor_encode_map_start, entries); }
    void array(std::size_t items) { head(cbor_encode_array_start, items); }
    void uint(std::uint64_t value) { head(cbor_encode_uint, value); }
    void integer(std::int64_t value)
    {
        if (value >= 0) uint(static_cast<std::uint64_t>(value));
        else head(cbor_encode_negint, static_cast<std::uint64_t>(-1 - value));
    }
    void number(double value)
    {
        std::uint8_t buffer[9];
        append(buffer, cbor_encode_double(value, buffer, sizeof buffer));
    }
    void text(const std::string& value)
    {
        head(cbor_encode_string_start, value.size());
        out_.insert(out_.end(), value.begin(), value.end());
    }
    void bytes(std::span<const std::uint8_t> value)
    {
        head(cbor_encode_bytestring_start, value.size());
        out_.insert(out_.end(), value.begin(), value.end());
    }

private:
    template <typename Encoder, typename T>
    void head(Encoder encoder, T value)
    {
        std::uint8_t buffer[9];
        append(buffer, encoder(value, buffer, sizeof buffer));
    }
    void append(const std::uint8_t* buffer, std::size_t n)
    {
        if (n == 0) throw std::runtime_error{"CBOR: item head did not fit"};
        out_.insert(out_.end(), buffer, buffer + n);
    }

    std::vector<std::uint8_t>& out_;
};

void write_array(CborWriter& w, const MultiDimArray& array, const EncodeOptions& options)
{
    w.tag(40);
    w.array(2);
    w.array(array.shape.size());
    for (auto d : array.shape) w.uint(d);
    w.tag(typed_array_tag(array.dtype));
    switch (options.compression) {
    case Compression::none: w.bytes(array.bytes); break;
    case Compression::lz4:
        w.tag(56500);
        w.array(3);
        w.text("lz4");
        w.uint(0);
        w.bytes(compress_lz4(array.bytes));
        break;
    case Compression::bslz4:
        w.tag(56500);
        w.array(3);
        w.text("bslz4");
        w.uint(element_size(array.dtype));
        w.bytes(compress_bslz4(array.bytes, element_size(array.dtype), options.block_size));
        break;
    }
}

void write_channel_map(CborWriter& w, const std::map<std::string, MultiDimArray>& arrays,
                       const EncodeOptions& options)
{
    w.map(arrays.size());
    for (const auto& [channel, array] : arrays) {
        w.text(channel);
        write_array(w, array, options);
    }
}

void write(CborWriter& w, const StartMessage& m, const EncodeOptions& options)
{
    w.map(11);
    w.text("type");
    w.text("start");
    w.text("series_id");
    w.uint(m.series_id);
    w.text("series_unique_id");
    w.text(m.series_unique_id);
    w.text("channels");
    w.array(m.channels.size());
    for (const auto& c : m.channels) w.text(c);
    w.text("number_of_images");
    w.uint(m.number_of_images);
    w.text("image_size_x");
    w.uint(m.image_size_x);
    w.text("image_size_y");
    w.uint(m.image_size_y);
    w.text("image_dtype");
    w.text(m.image_dtype);
    w.text("frame_time");
    w.number(m.frame_time);
    w.text("flatfield");
    write_channel_map(w, m.flatfield, options);
    w.text("user_data");
    w.map(1);
    w.text("darkfield");
    write_channel_map(w, m.darkfield, options);
}

void write(CborWriter& w, const ImageMessage& m, const EncodeOptions& options)
{
    w.map(m.publish_time_ns ? 6 : 5);
    w.text("type");
    w.text("image");
    w.text("series_id");
    w.uint(m.series_id);
    w.text("series_unique_id");
    w.text(m.series_unique_id);
    w.text("image_id");
    w.uint(m.image_id);
    w.text("data");
    write_channel_map(w, m.data, options);
    if (m.publish_time_ns) {
        w.text("user_data");
        w.map(1);
        w.text("publish_time_ns");
        w.integer(*m.publish_time_ns);
    }
}

void write(CborWriter& w, const EndMessage& m, const EncodeOptions&)
{
    w.map(3);
    w.text("type");
    w.text("end");
    w.text("series_id");
    w.uint(m.series_id);
    w.text("series_unique_id");
    w.text(m.series_unique_id);
}

}  // namespace

std::vector<std::uint8_t> encode_message(const Message& message, const EncodeOptions& options)
{
    std::vector<std::uint8_t> out;
    CborWriter w{out};
    w.tag(55799);
    std::visit([&](const auto& m) { write(w, m, options); }, message);
    return out;
}

}  // namespace recon::stream
