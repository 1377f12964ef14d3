// NXtomo import: a small synthetic scan (darks, flats, projections
// interleaved) becomes one sinogram frame per detector row.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <sstream>

#include "recon/hdf5.hpp"
#include "sensors/preprocess.hpp"
#include "sensors/recording.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

/// A scan of `rows` x `cols` uint16 images: 2 darks, 3 flats, `views`
/// projections, then 2 more flats; kept in memory for the reference.
struct Scan {
    std::int64_t rows = 3, cols = 11, views = 9;
    std::vector<std::int64_t> keys;
    std::vector<double> angles;
    std::vector<std::uint16_t> data;  // [images][rows][cols]

    std::int64_t images() const { return static_cast<std::int64_t>(keys.size()); }
    double at(std::int64_t image, std::int64_t r, std::int64_t c) const
    {
        return data[static_cast<std::size_t>((image * rows + r) * cols + c)];
    }
    /// Mean over the images of one key at (r, c).
    double mean(std::int64_t key, std::int64_t r, std::int64_t c) const
    {
        double sum = 0.0;
        int n = 0;
        for (std::int64_t i = 0; i < images(); ++i) {
            if (keys[static_cast<std::size_t>(i)] == key) {
                sum += at(i, r, c);
                ++n;
            }
        }
        return sum / n;
    }
};

Scan make_scan(std::mt19937_64& rng)
{
    Scan s;
    for (int i = 0; i < 2; ++i) s.keys.push_back(2);
    for (int i = 0; i < 3; ++i) s.keys.push_back(1);
    for (std::int64_t i = 0; i < s.views; ++i) s.keys.push_back(0);
    for (int i = 0; i < 2; ++i) s.keys.push_back(1);
    std::uniform_real_distribution<double> dark{80, 120}, flat{30000, 50000}, p{0.05, 3.0};
    std::int64_t projection = 0;
    for (std::int64_t key : s.keys) {
        s.angles.push_back(key == 0 ? 180.0 * static_cast<double>(projection++) / s.views : 0.0);
        for (std::int64_t px = 0; px < s.rows * s.cols; ++px) {
            const double d = dark(rng);
            const double value = key == 2   ? d
                                 : key == 1 ? flat(rng)
                                            : d + (40000 - d) * std::exp(-p(rng));
            s.data.push_back(static_cast<std::uint16_t>(std::lround(value)));
        }
    }
    return s;
}

void write_scan(const std::string& path, const Scan& s, const std::string& entry = "/entry")
{
    const hdf5::File file = hdf5::File::create(path);
    const hdf5::Group e = file.create_group(entry);
    e.write_attribute("NX_class", "NXentry");
    e.write_string_dataset("definition", "NXtomo");
    e.write_dataset("instrument/detector/data", {s.images(), s.rows, s.cols}, s.data);
    e.write_dataset("instrument/detector/image_key", {s.images()}, s.keys, hdf5::Dtype::int32);
    e.write_dataset("sample/rotation_angle", {s.images()}, s.angles)
        .write_attribute("units", "degree");
}

void expect_frames_match(const sensors::RecordingReader& r, const Scan& s)
{
    for (std::int64_t row = 0; row < s.rows; ++row) {
        const sensors::Frame f = r.read_frame("nxtomo", row);
        ASSERT_EQ(f.data.size(), static_cast<std::size_t>(s.views * s.cols));
        std::int64_t v = 0;
        for (std::int64_t i = 0; i < s.images(); ++i) {
            if (s.keys[static_cast<std::size_t>(i)] != 0) continue;
            for (std::int64_t c = 0; c < s.cols; ++c) {
                const double dark = s.mean(2, row, c);
                const double ref = -std::log((s.at(i, row, c) - dark) / (s.mean(1, row, c) - dark));
                EXPECT_NEAR(f.data[static_cast<std::size_t>(v * s.cols + c)], ref, 2e-5 * (1 + ref))
                    << "row " << row << " view " << v << " col " << c;
            }
            ++v;
        }
    }
}

TEST(Nxtomo, SlicesBecomeSinogramFrames)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const Scan s = make_scan(rng);
    const std::string path = dir.file("scan.nx");
    write_scan(path, s);
    const sensors::RecordingReader r{path};
    EXPECT_EQ(r.format(), "nxtomo");
    ASSERT_EQ(r.sensors().size(), 1u);
    const sensors::SensorInfo& info = r.sensor("nxtomo");
    EXPECT_EQ(info.frames, s.rows);
    EXPECT_EQ(info.measurements, s.views * s.cols);
    EXPECT_EQ(info.frame_shape, (std::vector<std::int64_t>{s.views, s.cols}));
    EXPECT_EQ(info.dtype, "uint16");
    EXPECT_TRUE(info.raw_counts);
    EXPECT_TRUE(info.has_dark);
    EXPECT_TRUE(info.has_flat);
    EXPECT_FALSE(info.has_ground_truth);
    EXPECT_EQ(info.system.geometry, "parallel2d");
    EXPECT_EQ(info.system.nx, s.cols);
    EXPECT_EQ(info.system.ny, s.cols);
    EXPECT_EQ(info.system.bins, s.cols);
    EXPECT_EQ(info.system.views, s.views);
    ASSERT_EQ(info.system.angles_deg.size(), static_cast<std::size_t>(s.views));
    EXPECT_DOUBLE_EQ(info.system.angles_deg[1], 180.0 / s.views);
    EXPECT_EQ(r.timestamps("nxtomo"),
              std::vector<std::int64_t>(static_cast<std::size_t>(s.rows), 0));
    expect_frames_match(r, s);
    EXPECT_FALSE(r.ground_truth("nxtomo", 0).has_value());
    expect_error([&] { (void)r.read_frame("nxtomo", s.rows); }, {"frame 3 outside [0, 3)"});
}

TEST(Nxtomo, ReadsAnH5pyScanUnderAnotherEntryWithRadians)
{
    RECON_REQUIRE_PYTHON();
    const auto seed = fresh_seed() % 1000000;
    SCOPED_TRACE(seed_trace(seed));
    TempDir dir;
    const std::string path = dir.file("h5py_scan.nx");
    std::ostringstream script;
    script << "import numpy as np, h5py\n"
           << "rng = np.random.default_rng(" << seed << ")\n"
           << "keys = np.array([2, 1, 0, 0, 0, 0, 1], dtype=np.uint8)\n"
           << "data = rng.uniform(1000, 2000, (7, 2, 5)).astype(np.float32)\n"
           << "data[keys == 2] = 100.0\n"
           << "data[keys == 1] = 3000.0\n"
           << "angles = np.array([0, 0, 0, 0.5, 1.0, 1.5, 0])\n"
           << "with h5py.File('" << path << "', 'w') as f:\n"
           << "    e = f.create_group('scan1')\n"
           << "    e.attrs['NX_class'] = 'NXentry'\n"
           << "    e['instrument/detector/data'] = data\n"
           << "    e['instrument/detector/image_key'] = keys\n"
           << "    a = e.create_dataset('sample/rotation_angle', data=angles)\n"
           << "    a.attrs['units'] = 'rad'\n"
           << "    ref = -np.log((data[keys == 0] - 100.0) / 2900.0)\n"
           << "    f['reference'] = ref.transpose(1, 0, 2).astype(np.float32)\n";
    ASSERT_NO_FATAL_FAILURE(run_python(dir, script.str()));
    const sensors::RecordingReader r{path};
    EXPECT_EQ(r.format(), "nxtomo");
    const sensors::SensorInfo& info = r.sensor("nxtomo");
    EXPECT_EQ(info.dtype, "float32");
    ASSERT_EQ(info.system.angles_deg.size(), 4u);
    EXPECT_NEAR(info.system.angles_deg[2], 180.0 / std::numbers::pi, 1e-9);
    const auto ref = hdf5::File::open(path).open_dataset("reference").read<float>();
    for (std::int64_t row = 0; row < 2; ++row) {
        const auto data = r.read_frame("nxtomo", row).data;
        for (std::size_t i = 0; i < data.size(); ++i) {
            EXPECT_NEAR(data[i], ref[static_cast<std::size_t>(row) * 20 + i], 1e-5);
        }
    }
}

TEST(Nxtomo, BadScans)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const Scan s = make_scan(rng);
    const auto edited = [&](const std::string& name, auto&& change) {
        const std::string path = dir.file(name);
        write_scan(path, s);
        change(hdf5::File::open(path, hdf5::File::Mode::read_write));
        return path;
    };
    const std::string no_angles = edited(
        "no_angles.nx", [](const hdf5::File& f) { f.remove("/entry/sample/rotation_angle"); });
    expect_error([&] { sensors::RecordingReader{no_angles}; },
                 {no_angles, "/entry/sample/rotation_angle", "dataset not found"});

    const std::string short_keys = edited("short_keys.nx", [](const hdf5::File& f) {
        f.remove("/entry/instrument/detector/image_key");
        f.write_dataset("/entry/instrument/detector/image_key", {4},
                        std::vector<std::int32_t>{0, 0, 0, 0});
    });
    expect_error([&] { sensors::RecordingReader{short_keys}; },
                 {"/entry/instrument/detector/image_key", "expected shape [16]", "found [4]"});

    const std::string short_angles = edited("short_angles.nx", [](const hdf5::File& f) {
        f.remove("/entry/sample/rotation_angle");
        f.write_dataset("/entry/sample/rotation_angle", {15}, std::vector<double>(15, 1.0));
    });
    expect_error([&] { sensors::RecordingReader{short_angles}; },
                 {"/entry/sample/rotation_angle", "expected shape [16] (one angle per image)"});

    const std::string no_projections = edited("flats_only.nx", [](const hdf5::File& f) {
        f.remove("/entry/instrument/detector/image_key");
        f.write_dataset("/entry/instrument/detector/image_key", {16},
                        std::vector<std::int32_t>(16, 1));
    });
    expect_error([&] { sensors::RecordingReader{no_projections}; },
                 {"/entry/instrument/detector/data", "no projection images"});

    const std::string flat_stack = edited("rank2.nx", [](const hdf5::File& f) {
        f.remove("/entry/instrument/detector/data");
        f.write_dataset("/entry/instrument/detector/data", {16, 33},
                        std::vector<float>(16 * 33, 1.0f));
    });
    expect_error([&] { sensors::RecordingReader{flat_stack}; },
                 {"expected rank 3 [images, rows, cols]", "[16, 33]"});

    const std::string float_keys = edited("float_keys.nx", [](const hdf5::File& f) {
        f.remove("/entry/instrument/detector/image_key");
        f.write_dataset("/entry/instrument/detector/image_key", {16}, std::vector<float>(16, 0.0f));
    });
    expect_error([&] { sensors::RecordingReader{float_keys}; },
                 {"image_key", "expected integer keys", "float32"});

    // Projections darker than the dark field are clamped, never NaN.
    const std::string dark_hot = edited("dark_hot.nx", [&](const hdf5::File& f) {
        const hdf5::Dataset d = f.open_dataset("/entry/instrument/detector/data");
        std::vector<std::uint16_t> hot(static_cast<std::size_t>(s.rows * s.cols), 60000);
        d.write_slab<std::uint16_t>({0, 0, 0}, {1, s.rows, s.cols}, hot);
    });
    const sensors::RecordingReader r{dark_hot};
    for (float v : r.read_frame("nxtomo", 0).data) {
        EXPECT_TRUE(std::isfinite(v));
        EXPECT_LE(v, -std::log(sensors::min_transmission) + 1e-3f);
    }
}

}  // namespace
}  // namespace recon::test
