// The HDF5 output writer: layout of DESIGN §6, one chunk per frame, and
// timing rows that stay next to their images when records arrive out of order.

#include <random>

#include <gtest/gtest.h>

#include "pipeline/hdf5_output.hpp"
#include "temp_dir.hpp"

namespace recon::pipeline {
namespace {

Reconstruction frame(const std::string& sensor, std::int64_t id, std::mt19937& rng)
{
    std::uniform_real_distribution<float> u{-1.0f, 1.0f};
    Reconstruction r;
    r.sensor = sensor;
    r.frame_id = id;
    r.t_arrival_ns = 1'700'000'000'123'456'789LL + id;  // needs all 64 bits
    r.shape = {5, 9};
    r.image.resize(45);
    for (auto& v : r.image) v = u(rng);
    for (const Stage s : all_stages) r.times[s] = 1.0 + u(rng);
    r.times.total_ms = 10.0 + static_cast<double>(id);
    r.result.iterations = 7 + static_cast<int>(id);
    r.result.rel_gradient = 0.25;
    r.result.status = recon::SolveStatus::max_iterations;
    r.deadline_missed = id % 2 == 1;
    r.quality = Quality{30.0 + static_cast<double>(id), 0.9};
    return r;
}

TEST(Hdf5OutputWriter, WritesImagesTimingAndParameters)
{
    std::mt19937 rng{std::random_device{}()};
    const test::TempDir scratch;
    const auto path = scratch.file("output.h5");
    const auto f0 = frame("front", 4, rng), f1 = frame("front", 5, rng), g0 = frame("side", 0, rng);
    {
        Hdf5OutputWriter writer{path, {"[solver]\niterations = 7\n", "9.9.9", "cpu", 40.0}};
        writer.write_image(f0);
        writer.write_image(f1);
        writer.write_image(g0);
        writer.write_record(f1);  // records out of order: rows follow the images
        writer.write_record(g0);
        writer.write_record(f0);
        writer.close();
    }
    const auto file = hdf5::File::open(path);
    const auto data = file.open_dataset("/entry/reconstruction/front/data");
    EXPECT_EQ(data.shape(), (hdf5::Shape{2, 5, 9}));
    EXPECT_EQ(data.chunk_shape(), (hdf5::Shape{1, 5, 9}));
    EXPECT_EQ(data.read_slab<float>({1, 0, 0}, {1, 5, 9}), f1.image);
    const std::string timing = "/entry/reconstruction/front/timing/";
    EXPECT_EQ(file.open_dataset(timing + "frame_id").read<std::int64_t>(),
              (std::vector<std::int64_t>{4, 5}));
    EXPECT_EQ(file.open_dataset(timing + "t_arrival_ns").read<std::int64_t>(),
              (std::vector<std::int64_t>{f0.t_arrival_ns, f1.t_arrival_ns}));
    EXPECT_EQ(file.open_dataset(timing + "solve_ms").read<double>(),
              (std::vector<double>{f0.times[Stage::solve], f1.times[Stage::solve]}));
    EXPECT_EQ(file.open_dataset(timing + "iterations").read<int>(), (std::vector<int>{11, 12}));
    EXPECT_EQ(file.open_dataset(timing + "deadline_missed").read<int>(), (std::vector<int>{0, 1}));
    EXPECT_EQ(file.open_group(timing).read_scalar_attribute<double>("budget_ms"), 40.0);
    EXPECT_EQ(file.open_dataset("/entry/reconstruction/front/quality/psnr_db").read<double>(),
              (std::vector<double>{34.0, 35.0}));
    EXPECT_EQ(file.open_dataset("/entry/reconstruction/side/data").shape(),
              (hdf5::Shape{1, 5, 9}));
    EXPECT_EQ(file.open_dataset("/entry/reconstruction/parameters/config").read_string(),
              "[solver]\niterations = 7\n");
    EXPECT_EQ(file.open_dataset("/entry/reconstruction/parameters/version").read_string(), "9.9.9");
}

TEST(Hdf5OutputWriter, ShapeChangeAndUnwritablePathAreErrors)
{
    std::mt19937 rng{std::random_device{}()};
    const test::TempDir scratch;
    const auto path = scratch.file("output.h5");
    {
        Hdf5OutputWriter writer{path, {"", "1", "cpu", 1.0}};
        writer.write_image(frame("a", 0, rng));
        auto other = frame("a", 1, rng);
        other.shape = {9, 5};
        EXPECT_THROW(writer.write_image(other), std::runtime_error);
    }
    EXPECT_THROW((Hdf5OutputWriter{"/no-such-dir/x/out.h5", {"", "1", "cpu", 1.0}}),
                 std::runtime_error);
}

}  // namespace
}  // namespace recon::pipeline
