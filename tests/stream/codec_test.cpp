// Stream V2 CBOR: hand-built known bytes, round trips, and every malformed case.

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "stream/bitshuffle.hpp"
#include "stream/cbor_builder.hpp"
#include "stream/codec.hpp"

namespace recon::stream {
namespace {

using Bytes = std::vector<std::uint8_t>;
using testing::CborBuilder;

ErrorKind kind_of(const Bytes& bytes, const DecodeLimits& limits = {})
{
    try {
        decode_message(bytes, limits);
    } catch (const StreamError& e) {
        EXPECT_EQ(std::string{e.what()}.find('\n'), std::string::npos) << "one line";
        EXPECT_FALSE(std::string{e.what()}.empty());
        return e.kind();
    }
    ADD_FAILURE() << "message was accepted";
    return ErrorKind::malformed_cbor;
}

template <typename T>
std::vector<T> random_values(std::size_t n, unsigned seed, double hi)
{
    std::mt19937 rng{seed};
    std::uniform_real_distribution<double> dist{1.0, hi};
    std::vector<T> out(n);
    for (auto& v : out) v = static_cast<T>(dist(rng));
    return out;
}

Bytes as_bytes(const std::vector<std::uint16_t>& v)
{
    Bytes out(v.size() * 2);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

/// An image message with one u16 channel, built byte by byte.
CborBuilder image_prefix(std::uint64_t entries)
{
    CborBuilder b;
    b.self_describe().map(entries).text("type").text("image").text("series_unique_id").text("s1")
        .text("image_id").uint(7);
    return b;
}

TEST(Codec, EndMessageKnownBytes)
{
    const Bytes expected{0xd9, 0xd9, 0xf7, 0xa3, 0x64, 't', 'y', 'p', 'e', 0x63, 'e', 'n', 'd',
                         0x69, 's', 'e', 'r', 'i', 'e', 's', '_', 'i', 'd', 0x05,
                         0x70, 's', 'e', 'r', 'i', 'e', 's', '_', 'u', 'n', 'i', 'q', 'u', 'e', '_',
                         'i', 'd', 0x63, 'a', 'b', 'c'};
    EXPECT_EQ(encode_message(EndMessage{5, "abc"}), expected);
    const auto end = std::get<EndMessage>(decode_message(expected));
    EXPECT_EQ(end.series_id, 5u);
    EXPECT_EQ(end.series_unique_id, "abc");
}

TEST(Codec, HandBuiltImageWithUnknownKeysAndTags)
{
    const auto values = random_values<std::uint16_t>(8, 1, 60000);
    CborBuilder b = image_prefix(7);
    // Unknown keys of every shape, which must be skipped.
    b.text("real_time").array(2).uint(1).uint(1000000);
    b.text("extra").tag(12345).map(2).text("x").raw({0xfb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18})
        .text("y").raw({0x9f, 0x01, 0x5f, 0x41, 0x00, 0xff, 0xf6, 0xff});
    b.text("data").map(1).text("det0").md_array({2, 4}, 69, as_bytes(values));
    b.text("user_data").map(2).text("note").text("hi").text("publish_time_ns").uint(1234567890123);
    const auto image = std::get<ImageMessage>(decode_message(b.data()));
    EXPECT_EQ(image.image_id, 7u);
    EXPECT_EQ(image.series_unique_id, "s1");
    ASSERT_EQ(image.data.count("det0"), 1u);
    const MultiDimArray& a = image.data.at("det0");
    EXPECT_EQ(a.shape, (std::vector<std::uint64_t>{2, 4}));
    EXPECT_EQ(a.dtype, DType::u16);
    const auto floats = a.to_float();
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(floats[i], static_cast<float>(values[i]));
    EXPECT_EQ(image.publish_time_ns, 1234567890123);
}

class RoundTrip : public ::testing::TestWithParam<Compression> {};

TEST_P(RoundTrip, EveryDtype)
{
    const EncodeOptions options{GetParam(), 0};
    ImageMessage image;
    image.series_id = 3;
    image.series_unique_id = "series-xyz";
    image.image_id = 42;
    image.publish_time_ns = -5;
    const auto u16 = random_values<std::uint16_t>(37 * 11, 2, 65000);
    const auto u32 = random_values<std::uint32_t>(16 * 300, 3, 4e9);
    const auto f32 = random_values<float>(5 * 7, 4, 1e3);
    std::vector<std::uint8_t> u8(1001);
    for (std::size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<std::uint8_t>(i * 7 + 3);
    image.data["a"] = MultiDimArray::from_u16({37, 11}, u16);
    image.data["b"] = MultiDimArray::from_u32({16, 300}, u32);
    image.data["c"] = MultiDimArray::from_f32({5, 7}, f32);
    image.data["d"] = MultiDimArray::from_u8({1001}, u8);
    const auto decoded = std::get<ImageMessage>(decode_message(encode_message(image, options)));
    EXPECT_EQ(decoded.series_id, 3u);
    EXPECT_EQ(decoded.series_unique_id, "series-xyz");
    EXPECT_EQ(decoded.image_id, 42u);
    EXPECT_EQ(decoded.publish_time_ns, -5);
    ASSERT_EQ(decoded.data.size(), 4u);
    for (const auto& [channel, array] : image.data) {
        const auto& got = decoded.data.at(channel);
        EXPECT_EQ(got.shape, array.shape) << channel;
        EXPECT_EQ(got.dtype, array.dtype) << channel;
        EXPECT_EQ(got.bytes, array.bytes) << channel;
    }

    StartMessage start;
    start.series_id = 3;
    start.series_unique_id = "series-xyz";
    start.channels = {"a", "b"};
    start.number_of_images = 100;
    start.image_size_x = 11;
    start.image_size_y = 37;
    start.image_dtype = "uint16";
    start.frame_time = 0.025;
    start.flatfield["a"] = MultiDimArray::from_f32({37, 11}, random_values<float>(37 * 11, 5, 9e3));
    start.darkfield["a"] = MultiDimArray::from_f32({37, 11}, random_values<float>(37 * 11, 6, 1e2));
    const auto s = std::get<StartMessage>(decode_message(encode_message(start, options)));
    EXPECT_EQ(s.channels, start.channels);
    EXPECT_EQ(s.number_of_images, 100u);
    EXPECT_EQ(s.image_size_x, 11u);
    EXPECT_EQ(s.image_size_y, 37u);
    EXPECT_EQ(s.image_dtype, "uint16");
    EXPECT_DOUBLE_EQ(s.frame_time, 0.025);
    EXPECT_EQ(s.flatfield.at("a").bytes, start.flatfield.at("a").bytes);
    EXPECT_EQ(s.darkfield.at("a").bytes, start.darkfield.at("a").bytes);
}

INSTANTIATE_TEST_SUITE_P(Compressions, RoundTrip,
                         ::testing::Values(Compression::none, Compression::lz4, Compression::bslz4));

Bytes valid_image(Compression compression)
{
    ImageMessage image;
    image.series_unique_id = "s";
    image.image_id = 1;
    image.data["det0"] = MultiDimArray::from_u16({16, 20}, random_values<std::uint16_t>(320, 9, 4e4));
    return encode_message(image, {compression, 0});
}

TEST(Codec, EveryTruncationIsATypedError)
{
    for (auto compression : {Compression::none, Compression::bslz4}) {
        const Bytes good = valid_image(compression);
        for (std::size_t n = 0; n < good.size(); ++n) {
            const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
            const ErrorKind kind = kind_of(cut);
            EXPECT_TRUE(kind == ErrorKind::truncated || kind == ErrorKind::missing_self_describe ||
                        kind == ErrorKind::shape_mismatch || kind == ErrorKind::corrupt_data)
                << "prefix " << n << ": " << to_string(kind);
        }
    }
}

TEST(Codec, RandomCorruptionNeverEscapes)
{
    std::mt19937 rng{11};
    const Bytes good = valid_image(Compression::lz4);
    for (int trial = 0; trial < 3000; ++trial) {
        Bytes bad = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<std::uint8_t>(rng());
        try {
            decode_message(bad);
        } catch (const StreamError&) {
        }
    }
}

TEST(Codec, MissingSelfDescribeTag)
{
    CborBuilder b;
    b.map(1).text("type").text("end");
    EXPECT_EQ(kind_of(b.data()), ErrorKind::missing_self_describe);
    CborBuilder other_tag;
    other_tag.tag(1).map(1).text("type").text("end");
    EXPECT_EQ(kind_of(other_tag.data()), ErrorKind::missing_self_describe);
}

TEST(Codec, UnknownTypeAndBadTopLevel)
{
    CborBuilder unknown;
    unknown.self_describe().map(1).text("type").text("calibration");
    EXPECT_EQ(kind_of(unknown.data()), ErrorKind::unknown_message_type);
    CborBuilder type_not_first;
    type_not_first.self_describe().map(2).text("series_id").uint(1).text("type").text("end");
    EXPECT_EQ(kind_of(type_not_first.data()), ErrorKind::bad_field);
    CborBuilder not_a_map;
    not_a_map.self_describe().array(1).text("type");
    EXPECT_EQ(kind_of(not_a_map.data()), ErrorKind::bad_field);
    CborBuilder trailing;
    trailing.self_describe().map(1).text("type").text("end").uint(0);
    EXPECT_EQ(kind_of(trailing.data()), ErrorKind::malformed_cbor);
    CborBuilder reserved;  // additional info 28 is reserved
    reserved.self_describe().raw({0xbc});
    EXPECT_EQ(kind_of(reserved.data()), ErrorKind::malformed_cbor);
    EXPECT_EQ(kind_of(Bytes{}), ErrorKind::truncated);
}

TEST(Codec, WrongFieldTypesAndMissingFields)
{
    CborBuilder id_as_text;
    id_as_text.self_describe().map(3).text("type").text("image").text("image_id").text("7")
        .text("data").map(0);
    EXPECT_EQ(kind_of(id_as_text.data()), ErrorKind::bad_field);
    CborBuilder no_id;
    no_id.self_describe().map(2).text("type").text("image").text("data").map(0);
    EXPECT_EQ(kind_of(no_id.data()), ErrorKind::bad_field);
    CborBuilder no_data;
    no_data.self_describe().map(2).text("type").text("image").text("image_id").uint(1);
    EXPECT_EQ(kind_of(no_data.data()), ErrorKind::bad_field);
    CborBuilder not_tag40 = image_prefix(4);
    not_tag40.text("data").map(1).text("c").array(2).array(1).uint(2).bytes({1, 2});
    EXPECT_EQ(kind_of(not_tag40.data()), ErrorKind::bad_field);
}

TEST(Codec, UnsupportedDtype)
{
    CborBuilder u64 = image_prefix(4);  // tag 71: uint64 little-endian
    u64.text("data").map(1).text("c").md_array({2}, 71, Bytes(16, 1));
    EXPECT_EQ(kind_of(u64.data()), ErrorKind::unsupported_dtype);
    CborBuilder f16 = image_prefix(4);  // tag 84: float16 little-endian
    f16.text("data").map(1).text("c").md_array({2}, 84, Bytes(4, 1));
    EXPECT_EQ(kind_of(f16.data()), ErrorKind::unsupported_dtype);
}

TEST(Codec, ShapeMustMatchTheData)
{
    CborBuilder b = image_prefix(4);
    b.text("data").map(1).text("c").md_array({3, 4}, 69, Bytes(22, 1));  // needs 24
    EXPECT_EQ(kind_of(b.data()), ErrorKind::shape_mismatch);
    CborBuilder rank0 = image_prefix(4);
    rank0.text("data").map(1).text("c").md_array({}, 69, Bytes(2, 1));
    EXPECT_EQ(kind_of(rank0.data()), ErrorKind::bad_field);
}

TEST(Codec, DecompressionBombsAreRefusedBeforeAllocating)
{
    // A shape of 10^12 elements with a tiny payload: refused on the shape.
    CborBuilder huge = image_prefix(4);
    huge.text("data").map(1).text("c").tag(40).array(2).array(2).uint(1000000).uint(1000000)
        .tag(70).tag(56500).array(3).text("lz4").uint(0).bytes({0x00});
    EXPECT_EQ(kind_of(huge.data()), ErrorKind::size_limit);
    CborBuilder overflow = image_prefix(4);
    overflow.text("data").map(1).text("c").tag(40).array(2).array(2).uint(1ull << 40).uint(1ull << 40)
        .tag(69).bytes({});
    EXPECT_EQ(kind_of(overflow.data()), ErrorKind::size_limit);
    // Within the shape but over a tighter configured limit.
    DecodeLimits tight;
    tight.max_array_bytes = 100;
    EXPECT_EQ(kind_of(valid_image(Compression::bslz4), tight), ErrorKind::size_limit);
    // An LZ4 block that expands far beyond its shape.
    const Bytes zeros(1 << 20, 0);
    const Bytes bomb = compress_lz4(zeros);
    CborBuilder lz4_bomb = image_prefix(4);
    lz4_bomb.text("data").map(1).text("c").tag(40).array(2).array(1).uint(16).tag(69).tag(56500)
        .array(3).text("lz4").uint(0).bytes(bomb);
    EXPECT_EQ(kind_of(lz4_bomb.data()), ErrorKind::corrupt_data);
    // A bslz4 header claiming 2^40 bytes under a small shape.
    Bytes header{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x20, 0};
    CborBuilder bs_bomb = image_prefix(4);
    bs_bomb.text("data").map(1).text("c").tag(40).array(2).array(1).uint(16).tag(69).tag(56500)
        .array(3).text("bslz4").uint(2).bytes(header);
    EXPECT_EQ(kind_of(bs_bomb.data()), ErrorKind::shape_mismatch);
}

TEST(Codec, CorruptCompressedData)
{
    const auto values = random_values<std::uint16_t>(64, 12, 6e4);
    Bytes block = compress_lz4(as_bytes(values));
    block[block.size() / 2] ^= 0xff;
    block.resize(block.size() - 3);
    CborBuilder lz4 = image_prefix(4);
    lz4.text("data").map(1).text("c").tag(40).array(2).array(1).uint(64).tag(69).tag(56500)
        .array(3).text("lz4").uint(0).bytes(block);
    EXPECT_EQ(kind_of(lz4.data()), ErrorKind::corrupt_data);
    CborBuilder zstd = image_prefix(4);
    zstd.text("data").map(1).text("c").tag(40).array(2).array(1).uint(64).tag(69).tag(56500)
        .array(3).text("zstd").uint(2).bytes(block);
    EXPECT_EQ(kind_of(zstd.data()), ErrorKind::unsupported_compression);
    CborBuilder wrong_elem = image_prefix(4);
    wrong_elem.text("data").map(1).text("c").tag(40).array(2).array(1).uint(64).tag(69).tag(56500)
        .array(3).text("bslz4").uint(4).bytes(compress_bslz4(as_bytes(values), 2));
    EXPECT_EQ(kind_of(wrong_elem.data()), ErrorKind::bad_field);
}

TEST(Codec, NestingAndLyingLengthsAreBounded)
{
    CborBuilder deep = image_prefix(5);
    deep.text("junk");
    for (int i = 0; i < 200; ++i) deep.array(1);
    deep.uint(0);
    deep.text("data").map(0);
    EXPECT_EQ(kind_of(deep.data()), ErrorKind::size_limit);
    CborBuilder lying = image_prefix(5);
    lying.text("junk").array(1ull << 40).uint(1);  // claims 2^40 items, has one
    EXPECT_EQ(kind_of(lying.data()), ErrorKind::truncated);
    CborBuilder huge_bytes = image_prefix(5);
    huge_bytes.text("junk").head(2, 1ull << 50);  // a byte string of 2^50 bytes
    EXPECT_EQ(kind_of(huge_bytes.data()), ErrorKind::truncated);
}

}  // namespace
}  // namespace recon::stream
