// Recordings: writer/reader round trips (line integrals and raw counts,
// dark/flat, angles, timestamps, ground truth, every geometry) and every
// kind of bad file, made with the HDF5 layer and with h5py.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>

#include "recon/hdf5.hpp"
#include "sensors/recording.hpp"
#include "sensors/simulator.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

using sensors::Frame;
using sensors::RecordingReader;
using sensors::RecordingWriter;
using sensors::SensorSetup;

SensorSetup parallel_setup(const std::string& name, index_t views, index_t bins,
                           std::mt19937_64& rng)
{
    SensorSetup s;
    s.name = name;
    s.system.geometry = "parallel2d";
    s.system.nx = bins;
    s.system.ny = bins + 1;
    s.system.bins = bins;
    std::uniform_real_distribution<double> angle{0.0, 360.0};
    for (index_t v = 0; v < views; ++v) s.system.angles_deg.push_back(angle(rng));
    s.system.views = views;
    s.system.center_offset = angle(rng) / 360.0 - 0.5;
    return s;
}

struct Written {
    std::vector<std::vector<float>> frames;
    std::vector<std::vector<float>> truth;
    std::vector<std::int64_t> stamps;
};

/// Writes `frames` random float frames (and ground truth) for one sensor.
Written write_frames(RecordingWriter& w, const SensorSetup& s, int frames, std::mt19937_64& rng)
{
    Written out;
    const std::size_t m = static_cast<std::size_t>(s.system.angles_deg.size()) *
                          static_cast<std::size_t>(s.system.bins);
    for (int k = 0; k < frames; ++k) {
        out.frames.push_back(random_vector(m, rng, 0.0f, 5.0f));
        out.truth.push_back(
            random_vector(static_cast<std::size_t>(s.system.nx * s.system.ny), rng));
        out.stamps.push_back(static_cast<std::int64_t>(rng() >> 3));
        w.append(s.name, out.stamps.back(), out.frames.back());
        w.append_ground_truth(s.name, out.truth.back());
    }
    return out;
}

TEST(Recording, FloatRoundTripWithTwoSensors)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::string path = dir.file("float.h5");
    const SensorSetup a = parallel_setup("a", 7, 9, rng);
    const SensorSetup b = parallel_setup("b", 5, 6, rng);
    Written wa, wb;
    {
        RecordingWriter w{path, {a, b}};
        wa = write_frames(w, a, 3, rng);
        wb = write_frames(w, b, 2, rng);
        EXPECT_EQ(w.frames("a"), 3);
        w.close();
        expect_error([&] { w.append("a", 0, wa.frames[0]); }, {"closed"});
    }
    const RecordingReader r{path};
    EXPECT_EQ(r.format(), "recording");
    ASSERT_EQ(r.sensors().size(), 2u);
    for (const auto& [setup, written] : {std::pair{&a, &wa}, std::pair{&b, &wb}}) {
        const sensors::SensorInfo& info = r.sensor(setup->name);
        EXPECT_EQ(info.system.geometry, "parallel2d");
        EXPECT_EQ(info.system.nx, setup->system.nx);
        EXPECT_EQ(info.system.ny, setup->system.ny);
        EXPECT_EQ(info.system.bins, setup->system.bins);
        EXPECT_EQ(info.system.views, static_cast<index_t>(setup->system.angles_deg.size()));
        EXPECT_EQ(info.system.angles_deg, setup->system.angles_deg);
        EXPECT_EQ(info.system.center_offset, setup->system.center_offset);
        EXPECT_EQ(info.frames, static_cast<std::int64_t>(written->frames.size()));
        EXPECT_EQ(info.measurements, static_cast<std::int64_t>(written->frames[0].size()));
        EXPECT_EQ(info.dtype, "float32");
        EXPECT_FALSE(info.raw_counts);
        EXPECT_TRUE(info.has_ground_truth);
        EXPECT_EQ(info.ground_truth_shape,
                  (std::vector<std::int64_t>{setup->system.ny, setup->system.nx}));
        EXPECT_EQ(r.timestamps(setup->name), written->stamps);
        for (std::int64_t k = 0; k < info.frames; ++k) {
            const Frame f = r.read_frame(setup->name, k);
            EXPECT_EQ(f.sensor, setup->name);
            EXPECT_EQ(f.frame_id, k);
            EXPECT_EQ(f.timestamp_ns, written->stamps[static_cast<std::size_t>(k)]);
            EXPECT_EQ(f.data, written->frames[static_cast<std::size_t>(k)]);
            EXPECT_EQ(r.ground_truth(setup->name, k).value(),
                      written->truth[static_cast<std::size_t>(k)]);
        }
    }
    // Layout details other tools rely on.
    const hdf5::File file = hdf5::File::open(path);
    const hdf5::Dataset data = file.open_dataset("/entry/sensors/a/data");
    EXPECT_EQ(data.shape(), (hdf5::Shape{3, 7, 9}));
    EXPECT_EQ(data.chunk_shape(), (hdf5::Shape{1, 7, 9}));
    EXPECT_EQ(file.open_dataset("/entry/sensors/a/timestamp_ns").dtype(), hdf5::Dtype::int64);
    EXPECT_EQ(file.open_dataset("/entry/sensors/a/rotation_angle").dtype(), hdf5::Dtype::float64);
    EXPECT_EQ(file.open_group("/entry/sensors/a").read_string_attribute("geometry"), "parallel2d");
}

/// Reference preprocessing in double precision.
std::vector<double> reference_line_integrals(const std::vector<std::uint32_t>& counts,
                                             const std::vector<float>& dark,
                                             const std::vector<float>& flat)
{
    std::vector<double> p(counts.size());
    for (std::size_t i = 0; i < counts.size(); ++i) {
        p[i] = -std::log((counts[i] - static_cast<double>(dark[i])) /
                         (flat[i] - static_cast<double>(dark[i])));
    }
    return p;
}

TEST(Recording, RawCountsWithDarkAndFlat)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::string path = dir.file("counts.h5");
    SensorSetup s = parallel_setup("det", 6, 8, rng);
    s.dtype = "uint16";
    const std::size_t m = 48;
    std::uniform_real_distribution<float> dark_level{90.0f, 110.0f}, flat_level{40000.0f, 60000.0f};
    for (std::size_t i = 0; i < m; ++i) {
        s.dark.push_back(dark_level(rng));
        s.flat.push_back(flat_level(rng));
    }
    std::vector<std::vector<std::uint32_t>> frames;
    {
        RecordingWriter w{path, {s}};
        for (int k = 0; k < 3; ++k) {
            std::vector<std::uint32_t> counts(m);
            for (std::size_t i = 0; i < m; ++i) {
                std::uniform_int_distribution<std::uint32_t> c{
                    static_cast<std::uint32_t>(s.dark[i]) + 2,
                    static_cast<std::uint32_t>(s.flat[i])};
                counts[i] = c(rng);
            }
            w.append_counts("det", 1000 * k, counts);
            frames.push_back(counts);
        }
        expect_error([&] { w.append("det", 0, std::vector<float>(m, 1.0f)); },
                     {"uint16", "append_counts"});
        std::vector<std::uint32_t> too_big(m, 100);
        too_big[5] = 70000;
        expect_error([&] { w.append_counts("det", 0, too_big); },
                     {"count 70000", "index 5", "uint16"});
    }
    const RecordingReader r{path};
    const sensors::SensorInfo& info = r.sensor("det");
    EXPECT_EQ(info.dtype, "uint16");
    EXPECT_TRUE(info.raw_counts);
    EXPECT_TRUE(info.has_dark);
    EXPECT_TRUE(info.has_flat);
    EXPECT_FALSE(info.has_ground_truth);
    EXPECT_EQ(info.frames, 3);
    EXPECT_FALSE(r.ground_truth("det", 0).has_value());
    for (int k = 0; k < 3; ++k) {
        const Frame f = r.read_frame("det", k);
        const auto ref =
            reference_line_integrals(frames[static_cast<std::size_t>(k)], s.dark, s.flat);
        ASSERT_EQ(f.data.size(), m);
        for (std::size_t i = 0; i < m; ++i)
            EXPECT_NEAR(f.data[i], ref[i], 1e-5 * (1.0 + std::fabs(ref[i])));
    }
}

TEST(Recording, RawCountsWithoutCalibrationUseTheFrameMaximum)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const std::string path = dir.file("uint32.h5");
    SensorSetup s = parallel_setup("det", 4, 5, rng);
    s.dtype = "uint32";
    std::vector<std::uint32_t> counts(20);
    std::uniform_int_distribution<std::uint32_t> c{1, 4000000000u};
    for (auto& x : counts) x = c(rng);
    {
        RecordingWriter w{path, {s}};
        w.append_counts("det", 7, counts);
    }
    const RecordingReader r{path};
    EXPECT_FALSE(r.sensor("det").has_dark);
    const Frame f = r.read_frame("det", 0);
    const double top = static_cast<float>(*std::max_element(counts.begin(), counts.end()));
    for (std::size_t i = 0; i < counts.size(); ++i) {
        const double ref = -std::log(std::max(static_cast<float>(counts[i]) / top, 1e-6));
        EXPECT_NEAR(f.data[i], ref, 1e-5 * (1.0 + ref));
    }
}

TEST(Recording, SyntheticAndMatrixGeometriesRebuildTheirSpec)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    std::filesystem::create_directories(dir.path() / "sub");
    const std::string path = dir.file("sub/geometries.h5");
    SensorSetup syn;
    syn.name = "syn";
    syn.system.geometry = "synthetic";
    syn.system.rows = 40;
    syn.system.cols = 12;
    syn.system.nnz = 150;
    syn.system.seed = rng();
    SensorSetup mat;
    mat.name = "mat";
    mat.system.geometry = "matrix";
    mat.system.matrix_file = (dir.path() / "a.h5").string();  // absolute: kept
    mat.system.matrix_group = "/custom";
    SensorSetup rel = mat;
    rel.name = "rel";
    rel.system.matrix_file = "other.mtx";  // relative to the working directory
    const auto syn_frame = random_vector(40, rng);
    const auto mat_frame = random_vector(17, rng);
    {
        RecordingWriter w{path, {syn, mat, rel}};
        w.append("syn", 1, syn_frame);
        w.append("mat", 2, mat_frame);  // m from the first frame
        w.append_ground_truth("mat", random_vector(6, rng));
        expect_error([&] { w.append("mat", 3, random_vector(16, rng)); },
                     {"frame 1 has 16 values, expected 17"});
        expect_error([&] { w.append("syn", 1, random_vector(39, rng)); }, {"expected 40"});
    }
    const RecordingReader r{path};
    const recon::SystemSpec& s = r.sensor("syn").system;
    EXPECT_EQ(s.geometry, "synthetic");
    EXPECT_EQ(s.rows, 40);
    EXPECT_EQ(s.cols, 12);
    EXPECT_EQ(s.nnz, 150);
    EXPECT_EQ(s.seed, syn.system.seed);
    EXPECT_EQ(r.read_frame("syn", 0).data, syn_frame);
    const recon::SystemSpec& m = r.sensor("mat").system;
    EXPECT_EQ(m.geometry, "matrix");
    EXPECT_EQ(std::filesystem::path{m.matrix_file}.lexically_normal(),
              (dir.path() / "a.h5").lexically_normal());
    EXPECT_EQ(m.matrix_group, "/custom");
    EXPECT_EQ(r.sensor("mat").measurements, 17);
    EXPECT_EQ(r.read_frame("mat", 0).data, mat_frame);
    EXPECT_EQ(r.sensor("mat").ground_truth_shape, (std::vector<std::int64_t>{1, 6}));
    // A relative matrix path resolves to the same file from the recording's directory.
    // A sensor whose frame size never became known reads as having no frames.
    EXPECT_EQ(r.sensor("rel").frames, 0);
    EXPECT_EQ(std::filesystem::weakly_canonical(r.sensor("rel").system.matrix_file),
              std::filesystem::weakly_canonical(std::filesystem::absolute("other.mtx")));
}

TEST(Recording, WriterRejectsBadSetups)
{
    TempDir dir;
    const std::string path = dir.file("bad_setup.h5");
    std::mt19937_64 rng{fresh_seed()};
    SensorSetup good = parallel_setup("good", 3, 4, rng);
    SensorSetup bad = good;
    bad.system.geometry = "fan3d";
    expect_error(
        [&] {
            RecordingWriter{path, {bad}};
        },
        {path, "'good'", "unknown geometry 'fan3d'"});
    bad = good;
    bad.dtype = "int8";
    expect_error(
        [&] {
            RecordingWriter{path, {bad}};
        },
        {"dtype must be float32, uint16 or uint32"});
    expect_error([&] { RecordingWriter{path, {good, good}}; }, {"duplicate sensor name"});
    bad = good;
    bad.dark.assign(12, 1.0f);
    expect_error([&] { RecordingWriter{path, {bad}}; }, {"dark/flat", "raw counts"});
    bad.dtype = "uint32";
    bad.dark.assign(11, 1.0f);
    expect_error([&] { RecordingWriter{path, {bad}}; }, {"dark has 11 values, expected 12"});
    bad = good;
    bad.system.views = 4;
    expect_error([&] { RecordingWriter{path, {bad}}; }, {"3 angles given for 4 views"});
    bad.system.angles_deg.clear();
    bad.system.views = 0;
    expect_error([&] { RecordingWriter{path, {bad}}; }, {"'good'", "views must be at least 1"});
    bad = good;
    bad.name = "a/b";
    expect_error([&] { RecordingWriter{path, {bad}}; }, {"no '/'"});
    expect_error([&] { RecordingWriter{path, {}}; }, {"needs a sensor"});
    RecordingWriter w{path, {good}};
    expect_error([&] { w.append("nobody", 0, {}); }, {"no sensor 'nobody'"});
    expect_error([&] { w.append_counts("good", 0, {1, 2}); }, {"float32", "use append"});
    expect_error([&] { w.append_ground_truth("good", random_vector(5, rng)); },
                 {"ground_truth", "5 pixels"});
}

// --- bad files ----------------------------------------------------------------------

/// A valid one-sensor recording ("s": 3 frames of 4 views x 5 bins).
std::string good_recording(const TempDir& dir, const std::string& name, std::mt19937_64& rng,
                           const std::string& dtype = "float32")
{
    const std::string path = dir.file(name);
    SensorSetup s = parallel_setup("s", 4, 5, rng);
    s.dtype = dtype;
    RecordingWriter w{path, {s}};
    for (int k = 0; k < 3; ++k) {
        if (dtype == "float32") {
            w.append("s", k, random_vector(20, rng));
        } else {
            w.append_counts(
                "s", k,
                std::vector<std::uint32_t>(20, 100 + static_cast<std::uint32_t>(rng() % 50)));
        }
        w.append_ground_truth("s", random_vector(30, rng));
    }
    return path;
}

hdf5::File edit(const std::string& path)
{
    return hdf5::File::open(path, hdf5::File::Mode::read_write);
}

TEST(Recording, MissingOrForeignFiles)
{
    TempDir dir;
    const std::string missing = dir.file("missing.h5");
    expect_error([&] { RecordingReader{missing}; }, {missing, "file not found"});
    const std::string text = dir.file("text.h5");
    write_text(text, "plain text");
    expect_error([&] { RecordingReader{text}; }, {text, "not an HDF5 file"});
    const std::string other = dir.file("other.h5");
    hdf5::File::create(other).write_dataset("/entry/x", {1}, std::vector<float>{1.0f});
    expect_error([&] { RecordingReader{other}; },
                 {other, "neither a recording", "nor an NXtomo scan"});
    const std::string empty = dir.file("empty.h5");
    hdf5::File::create(empty).create_group("/entry/sensors");
    expect_error([&] { RecordingReader{empty}; }, {empty, "/entry/sensors", "no sensor groups"});
}

TEST(Recording, BadDatasetsAndAttributes)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    struct Case {
        const char* name;
        void (*corrupt)(const hdf5::File&);
        std::vector<std::string> message;
    };
    const std::vector<Case> cases = {
        {"no_data",
         [](const hdf5::File& f) { f.remove("/entry/sensors/s/data"); },
         {"/entry/sensors/s/data", "dataset not found"}},
        {"wrong_rank",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/data");
             f.write_dataset("/entry/sensors/s/data", {3, 20}, std::vector<float>(60, 1.0f));
         },
         {"/entry/sensors/s/data", "expected rank 3 [frames, views, bins]", "found shape [3, 20]"}},
        {"wrong_dtype",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/data");
             f.write_dataset("/entry/sensors/s/data", {3, 4, 5}, std::vector<std::int64_t>(60, 1));
         },
         {"/entry/sensors/s/data", "expected float32, float64, uint16 or uint32", "found int64"}},
        {"angles_count",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/rotation_angle");
             f.write_dataset("/entry/sensors/s/rotation_angle", {3},
                             std::vector<double>{0, 60, 120});
         },
         {"/entry/sensors/s/rotation_angle", "has 3 angles but data has 4 views"}},
        {"no_angles",
         [](const hdf5::File& f) { f.remove("/entry/sensors/s/rotation_angle"); },
         {"/entry/sensors/s/rotation_angle", "dataset not found"}},
        {"timestamps_length",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/timestamp_ns");
             f.write_dataset("/entry/sensors/s/timestamp_ns", {2}, std::vector<std::int64_t>{1, 2});
         },
         {"/entry/sensors/s/timestamp_ns", "expected 3 timestamps", "[2]"}},
        {"timestamps_dtype",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/timestamp_ns");
             f.write_dataset("/entry/sensors/s/timestamp_ns", {3}, std::vector<double>{1, 2, 3});
         },
         {"/entry/sensors/s/timestamp_ns", "expected int64", "float64"}},
        {"unknown_geometry",
         [](const hdf5::File& f) {
             f.open_group("/entry/sensors/s").write_attribute("geometry", "cone");
         },
         {"/entry/sensors/s", "unknown geometry 'cone'"}},
        {"no_geometry",
         [](const hdf5::File& f) { f.open_group("/entry/sensors/s").delete_attribute("geometry"); },
         {"/entry/sensors/s", "attribute 'geometry' not found"}},
        {"bins_mismatch",
         [](const hdf5::File& f) {
             f.open_group("/entry/sensors/s").write_attribute("bins", std::int64_t{6});
         },
         {"attribute 'bins' = 6", "5 bins"}},
        {"nx_text",
         [](const hdf5::File& f) {
             f.open_group("/entry/sensors/s").write_attribute("nx", "five");
         },
         {"attribute 'nx'", "expected an integer"}},
        {"nx_negative",
         [](const hdf5::File& f) { f.open_group("/entry/sensors/s").write_attribute("nx", -5); },
         {"attribute 'nx' = -5", "positive"}},
        {"ground_truth_shape",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/ground_truth");
             f.write_dataset("/entry/sensors/s/ground_truth", {3, 5, 6},
                             std::vector<float>(90, 0.5f));
         },
         {"/entry/sensors/s/ground_truth", "expected images of [6, 5]", "[5, 6]"}},
        {"ground_truth_frames",
         [](const hdf5::File& f) {
             f.remove("/entry/sensors/s/ground_truth");
             f.write_dataset("/entry/sensors/s/ground_truth", {2, 6, 5},
                             std::vector<float>(60, 0.5f));
         },
         {"/entry/sensors/s/ground_truth", "expected [3, ny, nx]"}},
        {"dark_on_line_integrals",
         [](const hdf5::File& f) {
             f.write_dataset("/entry/sensors/s/dark", {4, 5}, std::vector<float>(20, 0.5f));
         },
         {"/entry/sensors/s/dark", "line integrals"}},
        {"bad_quantity",
         [](const hdf5::File& f) {
             f.open_group("/entry/sensors/s").write_attribute("quantity", "photons");
         },
         {"attribute 'quantity' = 'photons'"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string path = good_recording(dir, std::string{c.name} + ".h5", rng);
        c.corrupt(edit(path));
        std::vector<std::string> parts{path};
        parts.insert(parts.end(), c.message.begin(), c.message.end());
        const std::string message = error_of([&] { RecordingReader{path}; });
        ASSERT_FALSE(message.empty());
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        for (const std::string& part : parts) {
            EXPECT_NE(message.find(part), std::string::npos)
                << "lacks '" << part << "': " << message;
        }
    }
}

TEST(Recording, CalibrationShapeIsChecked)
{
    std::mt19937_64 rng{fresh_seed()};
    TempDir dir;
    const std::string path = good_recording(dir, "flat.h5", rng, "uint16");
    edit(path).write_dataset("/entry/sensors/s/flat", {5, 4}, std::vector<float>(20, 1000.0f));
    expect_error([&] { RecordingReader{path}; },
                 {path, "/entry/sensors/s/flat", "expected shape [4, 5]", "found [5, 4]"});
}

TEST(Recording, NonFiniteValuesNameSensorAndFrame)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    for (const float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        const std::string path = good_recording(dir, "nan.h5", rng);
        const std::int64_t index = static_cast<std::int64_t>(rng() % 20);
        edit(path)
            .open_dataset("/entry/sensors/s/data")
            .write_slab<float>({2, index / 5, index % 5}, {1, 1, 1},
                               std::span<const float>{&bad, 1});
        const RecordingReader r{path};
        EXPECT_NO_THROW((void)r.read_frame("s", 1));
        expect_error([&] { (void)r.read_frame("s", 2); },
                     {path, "/entry/sensors/s/data", "frame 2 of sensor 's'", "non-finite",
                      "index " + std::to_string(index)});
    }
    // A flat equal to a dark makes no non-finite value: such cells read 0.
    const std::string path = good_recording(dir, "dead.h5", rng, "uint16");
    const hdf5::File f = edit(path);
    f.write_dataset("/entry/sensors/s/dark", {4, 5}, std::vector<float>(20, 50.0f));
    std::vector<float> flat(20, 1000.0f);
    flat[3] = 50.0f;
    f.write_dataset("/entry/sensors/s/flat", {4, 5}, flat);
    const RecordingReader r{path};
    EXPECT_EQ(r.read_frame("s", 0).data[3], 0.0f);
}

TEST(Recording, FrameAndSensorLookupsAreChecked)
{
    std::mt19937_64 rng{fresh_seed()};
    TempDir dir;
    const std::string path = good_recording(dir, "lookup.h5", rng);
    const RecordingReader r{path};
    expect_error([&] { (void)r.read_frame("s", 3); },
                 {path, "sensor 's'", "frame 3 outside [0, 3)"});
    expect_error([&] { (void)r.read_frame("s", -1); }, {"frame -1 outside"});
    expect_error([&] { (void)r.sensor("t"); }, {path, "no sensor 't'", "sensors: s"});
    expect_error([&] { (void)r.ground_truth("s", 9); }, {"ground truth 9 outside"});
}

TEST(Recording, ReadsAndRejectsFilesWrittenByH5py)
{
    RECON_REQUIRE_PYTHON();
    const auto seed = fresh_seed() % 1000000;
    SCOPED_TRACE(seed_trace(seed));
    TempDir dir;
    const std::string good = dir.file("h5py_good.h5");
    const std::string bad_rank = dir.file("h5py_rank.h5");
    const std::string bad_geometry = dir.file("h5py_geometry.h5");
    std::ostringstream script;
    script << "import numpy as np, h5py\n"
           << "rng = np.random.default_rng(" << seed << ")\n"
           << "data = rng.uniform(0, 3, (2, 6, 10)).astype(np.float32)\n"
           << "angles = np.linspace(0, 180, 6, endpoint=False)\n"
           << "def make(path, data, geometry):\n"
           << "    with h5py.File(path, 'w') as f:\n"
           << "        g = f.create_group('entry/sensors/cam')\n"
           << "        g.create_dataset('data', data=data, chunks=(1,) + data.shape[1:])\n"
           << "        g['rotation_angle'] = angles\n"
           << "        g['timestamp_ns'] = np.array([5, 10], dtype=np.int64)\n"
           << "        g.attrs['geometry'] = geometry\n"
           << "        g.attrs['nx'] = np.int32(10)\n"
           << "        g.attrs['ny'] = 10.0\n"
           << "        g.attrs['center_offset'] = 0.25\n"
           << "make('" << good << "', data, 'parallel2d')\n"
           << "make('" << bad_rank << "', data.reshape(2, 60), 'parallel2d')\n"
           << "make('" << bad_geometry << "', data, np.bytes_(b'helical'))\n"
           << "np.save('" << dir.file("data.npy") << "', data)\n";
    ASSERT_NO_FATAL_FAILURE(run_python(dir, script.str()));
    const RecordingReader r{good};
    const sensors::SensorInfo& info = r.sensor("cam");
    EXPECT_EQ(info.system.nx, 10);
    EXPECT_EQ(info.system.ny, 10);
    EXPECT_EQ(info.system.center_offset, 0.25);
    EXPECT_EQ(info.system.views, 6);
    EXPECT_DOUBLE_EQ(info.system.angles_deg[3], 90.0);
    EXPECT_EQ(r.timestamps("cam"), (std::vector<std::int64_t>{5, 10}));
    const hdf5::File file = hdf5::File::open(good);
    EXPECT_EQ(r.read_frame("cam", 1).data,
              file.open_dataset("/entry/sensors/cam/data").read_slab<float>({1, 0, 0}, {1, 6, 10}));
    expect_error([&] { RecordingReader{bad_rank}; }, {bad_rank, "expected rank 3", "[2, 60]"});
    expect_error([&] { RecordingReader{bad_geometry}; },
                 {bad_geometry, "unknown geometry 'helical'"});
}

TEST(Recording, SimulatedRecordingReadsBackAsSimulated)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    TempDir dir;
    sensors::SimulatedSensor sensor;
    sensor.system.nx = sensor.system.ny = 24;
    sensor.system.views = 16;
    sensor.phantom.kind = sensors::PhantomKind::random_ellipses;
    sensor.phantom.max_line_integral = 2.0;
    sensor.noise.kind = sensors::NoiseKind::poisson;
    sensor.noise.photons = 5000;
    sensor.dtype = "uint16";
    sensors::SimulationConfig config = sensors::SimulationConfig::uniform(2, sensor, 3, 20.0, seed);
    const std::string path = dir.file("simulated.h5");
    sensors::simulate_recording(path, config);
    const sensors::Simulator simulator{config};
    const RecordingReader r{path};
    ASSERT_EQ(r.sensors().size(), 2u);
    for (std::size_t s = 0; s < 2; ++s) {
        const std::string name = "sensor" + std::to_string(s);
        EXPECT_EQ(r.sensor(name).dtype, "uint16");
        EXPECT_EQ(r.sensor(name).frames, 3);
        EXPECT_EQ(r.sensor(name).notes.at("simulated_noise"), "poisson");
        for (std::int64_t k = 0; k < 3; ++k) {
            const sensors::SimulatedFrame expected = simulator.frame(s, k);
            const Frame f = r.read_frame(name, k);
            EXPECT_EQ(f.timestamp_ns, k * 50000000);
            EXPECT_EQ(f.data, expected.frame.data);
            EXPECT_EQ(r.ground_truth(name, k).value(), expected.ground_truth);
        }
    }
}

}  // namespace
}  // namespace recon::test
