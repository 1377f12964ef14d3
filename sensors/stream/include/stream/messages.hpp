#pragma once
// The DECTRIS Stream V2 messages the reconstruction needs, as plain structs.
// Unknown keys of the wire format are skipped on decode; see codec.hpp.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace recon::stream {

/// Element types of RFC 8746 typed arrays that Stream V2 uses (little-endian).
enum class DType { u8, u16, u32, f32 };

const char* to_string(DType dtype);
std::size_t element_size(DType dtype);
/// RFC 8746 tag of a dtype: 64 u8, 69 u16 LE, 70 u32 LE, 85 f32 LE.
std::uint64_t typed_array_tag(DType dtype);

/// Compression of an array on the wire (tag 56500).
enum class Compression { none, lz4, bslz4 };
const char* to_string(Compression compression);

/// An n-dimensional array (tag 40): shape in row-major order (slowest first),
/// elements little-endian in `bytes`, always decompressed once decoded.
struct MultiDimArray {
    std::vector<std::uint64_t> shape;
    DType dtype = DType::u16;
    std::vector<std::uint8_t> bytes;

    std::uint64_t element_count() const;
    /// The elements converted to float (u32 counts above 2^24 round).
    std::vector<float> to_float() const;
    /// Builds an array from typed values (copies, little-endian host assumed).
    static MultiDimArray from_u16(std::vector<std::uint64_t> shape,
                                  const std::vector<std::uint16_t>& values);
    static MultiDimArray from_u32(std::vector<std::uint64_t> shape,
                                  const std::vector<std::uint32_t>& values);
    static MultiDimArray from_f32(std::vector<std::uint64_t> shape,
                                  const std::vector<float>& values);
    static MultiDimArray from_u8(std::vector<std::uint64_t> shape,
                                 const std::vector<std::uint8_t>& values);
};

/// `start`: opens a series. flatfield is the standard key; darkfield travels
/// in user_data.darkfield (a map channel -> array) since Stream V2 has none.
struct StartMessage {
    std::uint64_t series_id = 0;
    std::string series_unique_id;
    std::vector<std::string> channels;
    std::uint64_t number_of_images = 0;
    std::uint64_t image_size_x = 0, image_size_y = 0;
    std::string image_dtype;
    double frame_time = 0.0;  // seconds
    std::map<std::string, MultiDimArray> flatfield;
    std::map<std::string, MultiDimArray> darkfield;
};

/// `image`: one image of every channel.
struct ImageMessage {
    std::uint64_t series_id = 0;
    std::string series_unique_id;
    std::uint64_t image_id = 0;
    std::map<std::string, MultiDimArray> data;  // channel -> array
    /// user_data.publish_time_ns: the producer's CLOCK_REALTIME when it sent
    /// the message (nanoseconds since the epoch), for end-to-end latency.
    std::optional<std::int64_t> publish_time_ns;
};

/// `end`: closes a series.
struct EndMessage {
    std::uint64_t series_id = 0;
    std::string series_unique_id;
};

using Message = std::variant<StartMessage, ImageMessage, EndMessage>;

}  // namespace recon::stream
