// The RAII HDF5 layer: round trips for every element type, hyperslabs,
// extendible frame datasets, attributes, and one-line errors without HDF5's
// own stderr printing.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <thread>

#include "recon/hdf5.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937_64& rng)
{
    std::vector<T> v(n);
    if constexpr (std::is_floating_point_v<T>) {
        std::uniform_real_distribution<T> dist{T(-1e3), T(1e3)};
        for (auto& x : v) x = dist(rng);
    } else {
        std::uniform_int_distribution<std::int64_t> dist{
            static_cast<std::int64_t>(std::numeric_limits<T>::lowest()),
            static_cast<std::int64_t>(std::min<std::uint64_t>(
                std::numeric_limits<T>::max(), std::numeric_limits<std::int64_t>::max()))};
        for (auto& x : v) x = static_cast<T>(dist(rng));
    }
    return v;
}

template <class T>
class Hdf5RoundTrip : public ::testing::Test {
};
using ElementTypes =
    ::testing::Types<float, double, std::int32_t, std::int64_t, std::uint16_t, std::uint32_t>;
TYPED_TEST_SUITE(Hdf5RoundTrip, ElementTypes);

TYPED_TEST(Hdf5RoundTrip, WholeDatasetAndAttributes)
{
    using T = TypeParam;
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::string path = dir.file("round_trip.h5");
    const hdf5::Shape shape{3, 4, 5};
    const auto values = random_values<T>(60, rng);
    const auto attribute = random_values<T>(7, rng);
    {
        const hdf5::File file = hdf5::File::create(path);
        const hdf5::Dataset d = file.write_dataset("/group/sub/values", shape, values);
        d.write_attribute("array", attribute);
        d.write_attribute("scalar", attribute[0]);
    }
    const hdf5::File file = hdf5::File::open(path);
    ASSERT_TRUE(file.has_group("/group/sub"));
    ASSERT_TRUE(file.has_dataset("group/sub/values"));
    const hdf5::Dataset d = file.open_group("/group").open_dataset("sub/values");
    EXPECT_EQ(d.path(), "/group/sub/values");
    EXPECT_EQ(d.rank(), 3);
    EXPECT_EQ(d.shape(), shape);
    EXPECT_EQ(d.dtype(), hdf5::dtype_of<T>());
    EXPECT_TRUE(d.chunk_shape().empty());
    EXPECT_EQ(d.read<T>(), values);
    EXPECT_EQ(d.read_attribute<T>("array"), attribute);
    EXPECT_EQ(d.read_scalar_attribute<T>("scalar"), attribute[0]);
    const hdf5::TypeInfo info = d.attribute_info("array");
    EXPECT_EQ(info.dtype, hdf5::dtype_of<T>());
    EXPECT_EQ(info.shape, hdf5::Shape{7});
    EXPECT_TRUE(d.attribute_info("scalar").shape.empty());
}

TEST(Hdf5, ConvertsBetweenElementTypesOnRead)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const auto ints = random_values<std::int32_t>(20, rng);
    const auto doubles = random_values<double>(20, rng);
    const hdf5::File file = hdf5::File::create(dir.file("convert.h5"));
    const hdf5::Dataset i = file.write_dataset("ints", {20}, ints);
    const hdf5::Dataset d = file.write_dataset("doubles", {4, 5}, doubles);
    const auto as_double = i.read<double>();
    const auto as_float = d.read<float>();
    for (std::size_t k = 0; k < 20; ++k) {
        EXPECT_EQ(as_double[k], static_cast<double>(ints[k]));
        EXPECT_EQ(as_float[k], static_cast<float>(doubles[k]));
    }
    // Stored type differs from the memory type when asked for.
    const hdf5::Dataset narrow = file.write_dataset("narrow", {20}, doubles, hdf5::Dtype::float32);
    EXPECT_EQ(narrow.dtype(), hdf5::Dtype::float32);
    EXPECT_EQ(narrow.read<float>(), as_float);
}

TEST(Hdf5, HyperslabReadAndWrite)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::int64_t ny = 6, nx = 7;
    auto values = random_vector(static_cast<std::size_t>(ny * nx), rng);
    const hdf5::File file = hdf5::File::create(dir.file("slab.h5"));
    const hdf5::Dataset d = file.write_dataset("image", {ny, nx}, values);

    const auto block = d.read_slab<float>({2, 3}, {3, 2});
    ASSERT_EQ(block.size(), 6u);
    for (std::int64_t r = 0; r < 3; ++r) {
        for (std::int64_t c = 0; c < 2; ++c) {
            EXPECT_EQ(block[static_cast<std::size_t>(r * 2 + c)],
                      values[static_cast<std::size_t>((r + 2) * nx + c + 3)]);
        }
    }
    const auto patch = random_vector(4, rng);
    d.write_slab<float>({4, 5}, {2, 2}, patch);
    for (std::int64_t r = 0; r < 2; ++r) {
        for (std::int64_t c = 0; c < 2; ++c) {
            values[static_cast<std::size_t>((r + 4) * nx + c + 5)] =
                patch[static_cast<std::size_t>(r * 2 + c)];
        }
    }
    EXPECT_EQ(d.read<float>(), values);

    std::vector<float> out(4);
    d.read_slab<float>({0, 0}, {2, 2}, out);
    EXPECT_EQ(out[3], values[static_cast<std::size_t>(nx + 1)]);

    expect_error(
        [&] {
            (void)d.read_slab<float>({5, 0}, {2, 1});
        },
        {"slab.h5", "/image", "outside the shape [6, 7]"});
    expect_error([&] { (void)d.read_slab<float>({0}, {1}); }, {"/image", "rank"});
    expect_error(
        [&] {
            d.write_slab<float>({0, 0}, {2, 2}, std::span<const float>{patch.data(), 3});
        },
        {"/image", "3 elements"});
}

TEST(Hdf5, FramesGrowOneChunkPerFrame)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::string path = dir.file("frames.h5");
    std::vector<std::vector<float>> frames;
    std::vector<std::int64_t> stamps;
    {
        const hdf5::File file = hdf5::File::create(path);
        const hdf5::Dataset data = file.create_frames("/entry/data", hdf5::Dtype::float32, {4, 5});
        const hdf5::Dataset time = file.create_frames("/entry/time", hdf5::Dtype::int64, {}, 16);
        EXPECT_EQ(data.shape(), (hdf5::Shape{0, 4, 5}));
        for (int k = 0; k < 3; ++k) {
            frames.push_back(random_vector(20, rng));
            data.append(frames.back());
            stamps.push_back(static_cast<std::int64_t>(rng() >> 2));
            time.append(std::vector<std::int64_t>{stamps.back()});
        }
        expect_error([&] { data.append(random_vector(19, rng)); },
                     {"frames.h5", "/entry/data", "multiple of 20"});
    }
    const hdf5::File file = hdf5::File::open(path);
    const hdf5::Dataset data = file.open_dataset("/entry/data");
    EXPECT_EQ(data.shape(), (hdf5::Shape{3, 4, 5}));
    EXPECT_EQ(data.chunk_shape(), (hdf5::Shape{1, 4, 5}));
    EXPECT_EQ(data.max_shape(), (hdf5::Shape{hdf5::unlimited, 4, 5}));
    for (std::int64_t k = 0; k < 3; ++k) {
        EXPECT_EQ(data.read_slab<float>({k, 0, 0}, {1, 4, 5}), frames[static_cast<std::size_t>(k)]);
    }
    const hdf5::Dataset time = file.open_dataset("/entry/time");
    EXPECT_EQ(time.chunk_shape(), hdf5::Shape{16});
    EXPECT_EQ(time.read<std::int64_t>(), stamps);
}

TEST(Hdf5, TextAttributesAndDatasets)
{
    TempDir dir;
    const std::string path = dir.file("text.h5");
    const std::string text = "geometry = parallel2d; ü; " + std::to_string(fresh_seed());
    {
        const hdf5::File file = hdf5::File::create(path);
        const hdf5::Group g = file.create_group("a/b");
        g.write_attribute("text", text);
        g.write_attribute("literal", "parallel2d");
        g.write_attribute("count", std::int64_t{42});
        g.write_attribute("count", std::int64_t{43});  // replaces
        file.write_string_dataset("/a/config", text);
        file.write_attribute("root", "yes");
    }
    const hdf5::File file = hdf5::File::open(path);
    const hdf5::Group g = file.open_group("/a/b");
    EXPECT_EQ(g.read_string_attribute("text"), text);
    EXPECT_EQ(g.read_string_attribute("literal"), "parallel2d");
    EXPECT_EQ(g.read_scalar_attribute<int>("count"), 43);
    EXPECT_EQ(g.attribute_names(), (std::vector<std::string>{"count", "literal", "text"}));
    EXPECT_EQ(g.attribute_info("text").dtype, hdf5::Dtype::string);
    EXPECT_EQ(file.open_dataset("/a/config").read_string(), text);
    EXPECT_EQ(file.read_string_attribute("root"), "yes");
    EXPECT_EQ(file.children(), (std::vector<std::string>{"a"}));
    EXPECT_EQ(file.open_group("a").children(), (std::vector<std::string>{"b", "config"}));

    expect_error([&] { (void)g.read_attribute<double>("text"); },
                 {"text.h5", "/a/b", "attribute 'text'", "expected a number"});
    expect_error([&] { (void)g.read_string_attribute("count"); },
                 {"/a/b", "attribute 'count'", "expected a string"});
    expect_error([&] { (void)g.read_scalar_attribute<int>("missing"); },
                 {"text.h5", "/a/b", "attribute 'missing' not found"});
    expect_error([&] { (void)file.open_dataset("/a/config").read<float>(); },
                 {"/a/config", "dtype string"});
}

TEST(Hdf5, PathsAndMissingObjects)
{
    TempDir dir;
    const std::string path = dir.file("paths.h5");
    const hdf5::File file = hdf5::File::create(path);
    file.write_dataset("/x/data", {2}, std::vector<float>{1.5f, -2.5f});
    EXPECT_EQ(file.type_of("/x"), hdf5::ObjectType::group);
    EXPECT_EQ(file.type_of("/x/data"), hdf5::ObjectType::dataset);
    EXPECT_EQ(file.type_of("/x/data/deeper"), hdf5::ObjectType::none);
    EXPECT_EQ(file.type_of("/missing/deeper/still"), hdf5::ObjectType::none);
    EXPECT_EQ(file.type_of("/"), hdf5::ObjectType::group);

    expect_error([&] { (void)file.open_dataset("/x/nothing"); },
                 {"paths.h5: /x/nothing: dataset not found"});
    expect_error([&] { (void)file.open_group("/y/z"); }, {"paths.h5: /y/z: group not found"});
    expect_error([&] { (void)file.open_group("/x/data"); }, {"/x/data", "is not a group"});
    expect_error([&] { (void)file.open_dataset("/x"); }, {"/x", "is not a dataset"});
    expect_error([&] { (void)file.create_group("/x"); }, {"/x", "already exists"});
    expect_error([&] { (void)file.create_dataset("/x/data", hdf5::Dtype::float32, {3}); },
                 {"/x/data", "already exists"});
    file.remove("/x/data");
    EXPECT_FALSE(file.exists("/x/data"));
}

TEST(Hdf5, FileErrorsNameTheFile)
{
    TempDir dir;
    const std::string missing = dir.file("missing.h5");
    expect_error([&] { (void)hdf5::File::open(missing); }, {missing, "file not found"});
    const std::string text = dir.file("plain.txt");
    write_text(text, "not hdf5 at all\n");
    EXPECT_FALSE(hdf5::File::is_hdf5(text));
    expect_error([&] { (void)hdf5::File::open(text); }, {text, "not an HDF5 file"});
    expect_error([&] { (void)hdf5::File::open(dir.path().string()); }, {"not a regular file"});
    expect_error([&] { (void)hdf5::File::create(dir.file("no/such/dir/x.h5")); },
                 {"no/such/dir/x.h5", "cannot create"});
}

TEST(Hdf5, LibraryErrorsAreExceptionsNotPrints)
{
    TempDir dir;
    const hdf5::File file = hdf5::File::create(dir.file("fixed.h5"));
    const hdf5::Dataset fixed = file.write_dataset("fixed", {3}, std::vector<float>{1, 2, 3});
    const auto fail_inside_hdf5 = [&] { fixed.resize({5}); };  // not extendible
    ::testing::internal::CaptureStderr();
    const std::string message = error_of(fail_inside_hdf5);
    std::string thread_message;
    std::thread other{[&] { thread_message = error_of(fail_inside_hdf5); }};
    other.join();
    const std::string printed = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(printed, "");
    for (const std::string& m : {message, thread_message}) {
        EXPECT_NE(m.find("fixed.h5: /fixed: cannot resize to [5]"), std::string::npos) << m;
        EXPECT_NE(m.find("(HDF5: "), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
}

TEST(Hdf5, HandlesCloseWhenOwnersGoAway)
{
    TempDir dir;
    const std::string path = dir.file("close.h5");
    {
        hdf5::File file = hdf5::File::create(path);
        hdf5::Group group = file.create_group("g");
        hdf5::Group moved = std::move(group);
        EXPECT_FALSE(group.valid());  // NOLINT(bugprone-use-after-move): checks the move
        EXPECT_TRUE(moved.valid());
        hdf5::Dataset d = moved.write_dataset("d", {1}, std::vector<int>{7});
        hdf5::File other;
        other = std::move(file);
        EXPECT_TRUE(other.valid());
    }
    // Truncating a file that is still open in this process fails; this
    // succeeds only when every handle above was released.
    EXPECT_NO_THROW((void)hdf5::File::create(path));
    hdf5::Handle handle{-1};
    EXPECT_FALSE(handle.valid());
}

TEST(Hdf5, DatasetOptionsAreChecked)
{
    TempDir dir;
    const hdf5::File file = hdf5::File::create(dir.file("options.h5"));
    hdf5::DatasetOptions options;
    options.chunk = {2};
    expect_error(
        [&] {
            (void)file.create_dataset("a", hdf5::Dtype::float32, {4, 4}, options);
        },
        {"/a", "chunk [2] does not match shape [4, 4]"});
    options.chunk = {2, 2};
    options.deflate = 4;
    const hdf5::Dataset d = file.create_dataset("b", hdf5::Dtype::uint16, {4, 4}, options);
    EXPECT_EQ(d.chunk_shape(), (hdf5::Shape{2, 2}));
    std::vector<std::uint16_t> values(16);
    for (std::size_t i = 0; i < 16; ++i) values[i] = static_cast<std::uint16_t>(fresh_seed());
    d.write(values);
    EXPECT_EQ(d.read<std::uint16_t>(), values);
    expect_error([&] { (void)file.create_frames("c", hdf5::Dtype::float32, {3}, 0); },
                 {"/c", "frames_per_chunk"});
    EXPECT_EQ(hdf5::parse_dtype("uint32"), hdf5::Dtype::uint32);
    EXPECT_THROW((void)hdf5::parse_dtype("complex"), std::invalid_argument);
}

}  // namespace
}  // namespace recon::test
