// Writing our recording layout (see recording.hpp).

#include <algorithm>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "recon/hdf5.hpp"
#include "sensors/recording.hpp"
#include "sensors/simulator.hpp"

namespace recon::sensors {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t timestamps_per_chunk = 4096;

[[noreturn]] void bad_setup(const std::string& path, const std::string& sensor,
                            const std::string& what)
{
    throw std::invalid_argument(path + ": sensor '" + sensor + "': " + what);
}

}  // namespace

struct RecordingWriter::Impl {
    struct Sensor {
        SensorSetup setup;
        hdf5::Group group;
        hdf5::Dataset data, timestamps, ground_truth;
        hdf5::Shape frame_shape;  // empty until known (matrix without a size)
        hdf5::Dtype dtype = hdf5::Dtype::float32;
        std::int64_t frames = 0;
    };

    std::string path;
    hdf5::File file;
    std::vector<Sensor> sensors;
    bool open = false;

    Sensor& find(const std::string& name)
    {
        if (!open) throw std::runtime_error(path + ": recording writer is closed");
        for (Sensor& s : sensors) {
            if (s.setup.name == name) return s;
        }
        throw std::invalid_argument(path + ": no sensor '" + name + "' in this recording");
    }

    void setup_sensor(const SensorSetup& setup);
    void write_parallel2d(Sensor& s);
    void write_synthetic(Sensor& s);
    void write_matrix(Sensor& s);
    void write_calibration(Sensor& s, const char* name, const std::vector<float>& values);
    void create_data(Sensor& s, std::int64_t m);
    void check_frame(Sensor& s, std::size_t size);
};

/// Checks the setup, then writes the group, its attributes and the
/// per-sensor constant datasets.
void RecordingWriter::Impl::setup_sensor(const SensorSetup& setup)
{
    const std::string& name = setup.name;
    if (name.empty() || name.find('/') != std::string::npos) {
        bad_setup(path, name, "a sensor name must be non-empty and have no '/'");
    }
    for (const Sensor& other : sensors) {
        if (other.setup.name == name) bad_setup(path, name, "duplicate sensor name");
    }
    Sensor s;
    s.setup = setup;
    if (setup.dtype != "float32" && setup.dtype != "uint16" && setup.dtype != "uint32") {
        bad_setup(path, name,
                  "dtype must be float32, uint16 or uint32, found '" + setup.dtype + "'");
    }
    s.dtype = hdf5::parse_dtype(setup.dtype);
    const bool counts = s.dtype != hdf5::Dtype::float32;
    if (!counts && (!setup.dark.empty() || !setup.flat.empty())) {
        bad_setup(path, name, "dark/flat fields need raw counts (dtype uint16/uint32)");
    }

    s.group = file.create_group("/entry/sensors/" + name);
    s.group.write_attribute("geometry", setup.system.geometry);
    s.group.write_attribute("quantity", counts ? "counts" : "line_integral");
    if (setup.system.geometry == "parallel2d") {
        write_parallel2d(s);
    } else if (setup.system.geometry == "synthetic") {
        write_synthetic(s);
    } else if (setup.system.geometry == "matrix") {
        write_matrix(s);
    } else {
        bad_setup(path, name,
                  "unknown geometry '" + setup.system.geometry +
                      "' (expected parallel2d, synthetic or matrix)");
    }
    const std::int64_t m = setup.measurements;
    if (!s.frame_shape.empty() && m > 0 && m != hdf5::element_count(s.frame_shape)) {
        bad_setup(path, name,
                  "measurements = " + std::to_string(m) + " but the geometry has " +
                      std::to_string(hdf5::element_count(s.frame_shape)));
    }
    for (const auto& [key, value] : setup.notes) s.group.write_attribute(key, value);
    if (!s.frame_shape.empty()) create_data(s, hdf5::element_count(s.frame_shape));
    write_calibration(s, "dark", setup.dark);
    write_calibration(s, "flat", setup.flat);
    s.timestamps =
        s.group.create_frames("timestamp_ns", hdf5::Dtype::int64, {}, timestamps_per_chunk);
    sensors.push_back(std::move(s));
}

/// Angles (given, or k * range / views like the system model makes them),
/// grid and detector.
void RecordingWriter::Impl::write_parallel2d(Sensor& s)
{
    const recon::SystemSpec& spec = s.setup.system;
    const std::string& name = s.setup.name;
    const index_t bins = spec.bins > 0 ? spec.bins : spec.nx;
    std::vector<double> angles = spec.angles_deg;
    if (angles.empty()) {
        try {
            angles = make_angles(spec.views, spec.angle_range_deg);
        } catch (const std::exception& e) {
            bad_setup(path, name, e.what());
        }
    } else if (spec.views > 0 && static_cast<std::size_t>(spec.views) != angles.size()) {
        bad_setup(path, name,
                  std::to_string(angles.size()) + " angles given for " +
                      std::to_string(spec.views) + " views");
    }
    if (spec.nx <= 0 || spec.ny <= 0 || bins <= 0) {
        bad_setup(path, name, "parallel2d needs nx, ny, bins > 0");
    }
    const auto views = static_cast<std::int64_t>(angles.size());
    s.frame_shape = {views, bins};
    s.group.write_attribute("nx", static_cast<std::int64_t>(spec.nx));
    s.group.write_attribute("ny", static_cast<std::int64_t>(spec.ny));
    s.group.write_attribute("bins", static_cast<std::int64_t>(bins));
    s.group.write_attribute("views", views);
    s.group.write_attribute("center_offset", spec.center_offset);
    s.group.write_attribute("angle_range_deg", spec.angle_range_deg);
    s.group.write_dataset("rotation_angle", {views}, angles).write_attribute("units", "degree");
}

void RecordingWriter::Impl::write_synthetic(Sensor& s)
{
    const recon::SystemSpec& spec = s.setup.system;
    if (spec.rows <= 0 || spec.cols <= 0 || spec.nnz <= 0) {
        bad_setup(path, s.setup.name, "synthetic needs rows, cols, nnz > 0");
    }
    s.frame_shape = {spec.rows};
    s.group.write_attribute("rows", static_cast<std::int64_t>(spec.rows));
    s.group.write_attribute("cols", static_cast<std::int64_t>(spec.cols));
    s.group.write_attribute("nnz", static_cast<std::int64_t>(spec.nnz));
    s.group.write_attribute("seed", static_cast<std::uint64_t>(spec.seed));
}

/// The matrix file's path, stored relative to the recording's directory
/// (where the reader resolves it) when given relative to the working one.
/// m comes from the setup, or the dark/flat length, or the first frame.
void RecordingWriter::Impl::write_matrix(Sensor& s)
{
    const recon::SystemSpec& spec = s.setup.system;
    if (spec.matrix_file.empty())
        bad_setup(path, s.setup.name, "matrix geometry needs matrix_file");
    fs::path matrix = spec.matrix_file;
    if (matrix.is_relative()) {
        matrix = fs::proximate(fs::absolute(matrix), fs::absolute(path).parent_path());
    }
    s.group.write_attribute("matrix_file", matrix.generic_string());
    s.group.write_attribute("matrix_group", spec.matrix_group);
    std::int64_t m = s.setup.measurements;
    if (m == 0) m = static_cast<std::int64_t>(std::max(s.setup.dark.size(), s.setup.flat.size()));
    if (m > 0) s.frame_shape = {m};
}

void RecordingWriter::Impl::write_calibration(Sensor& s, const char* name,
                                              const std::vector<float>& values)
{
    if (values.empty()) return;
    const std::int64_t m = hdf5::element_count(s.frame_shape);
    if (static_cast<std::int64_t>(values.size()) != m) {
        bad_setup(path, s.setup.name,
                  std::string{name} + " has " + std::to_string(values.size()) +
                      " values, expected " + std::to_string(m));
    }
    s.group.write_dataset(name, s.frame_shape, values);
}

void RecordingWriter::Impl::create_data(Sensor& s, std::int64_t m)
{
    if (s.frame_shape.empty()) s.frame_shape = {m};
    s.data = s.group.create_frames("data", s.dtype, s.frame_shape);
}

/// Creates the data set on the first frame when its size was unknown and
/// checks the frame's length.
void RecordingWriter::Impl::check_frame(Sensor& s, std::size_t size)
{
    if (!s.data.valid()) create_data(s, static_cast<std::int64_t>(size));
    const std::int64_t m = hdf5::element_count(s.frame_shape);
    if (static_cast<std::int64_t>(size) != m) {
        s.data.fail("frame " + std::to_string(s.frames) + " has " + std::to_string(size) +
                    " values, expected " + std::to_string(m));
    }
}

RecordingWriter::RecordingWriter(const std::string& path, const std::vector<SensorSetup>& sensors)
    : impl_{std::make_unique<Impl>()}
{
    impl_->path = path;
    if (sensors.empty()) throw std::invalid_argument(path + ": a recording needs a sensor");
    impl_->file = hdf5::File::create(path);
    impl_->open = true;
    const hdf5::Group entry = impl_->file.create_group("/entry");
    entry.write_attribute("NX_class", "NXentry");
    const hdf5::Group group = impl_->file.create_group("/entry/sensors");
    group.write_attribute("NX_class", "NXcollection");
    group.write_attribute("format_version", std::int64_t{1});
    for (const SensorSetup& setup : sensors) impl_->setup_sensor(setup);
}

RecordingWriter::~RecordingWriter()
{
    try {
        if (impl_) close();
    } catch (...) {
        // A destructor must not throw; close() explicitly to see the error.
    }
}

RecordingWriter::RecordingWriter(RecordingWriter&&) noexcept = default;
RecordingWriter& RecordingWriter::operator=(RecordingWriter&&) noexcept = default;

void RecordingWriter::append(const std::string& sensor, std::int64_t timestamp_ns,
                             const std::vector<float>& data)
{
    Impl::Sensor& s = impl_->find(sensor);
    if (s.dtype != hdf5::Dtype::float32) {
        throw std::invalid_argument(impl_->path + ": sensor '" + sensor + "' records " +
                                    to_string(s.dtype) + " counts; use append_counts");
    }
    impl_->check_frame(s, data.size());
    s.data.append(data);
    s.timestamps.append(std::vector<std::int64_t>{timestamp_ns});
    ++s.frames;
}

void RecordingWriter::append_counts(const std::string& sensor, std::int64_t timestamp_ns,
                                    const std::vector<std::uint32_t>& counts)
{
    Impl::Sensor& s = impl_->find(sensor);
    if (s.dtype == hdf5::Dtype::float32) {
        throw std::invalid_argument(impl_->path + ": sensor '" + sensor +
                                    "' records float32 line integrals; use append");
    }
    impl_->check_frame(s, counts.size());
    if (s.dtype == hdf5::Dtype::uint16) {
        for (std::size_t i = 0; i < counts.size(); ++i) {
            if (counts[i] > std::numeric_limits<std::uint16_t>::max()) {
                s.data.fail("frame " + std::to_string(s.frames) + ": count " +
                            std::to_string(counts[i]) + " at index " + std::to_string(i) +
                            " exceeds the uint16 range");
            }
        }
    }
    s.data.append(counts);
    s.timestamps.append(std::vector<std::int64_t>{timestamp_ns});
    ++s.frames;
}

void RecordingWriter::append_ground_truth(const std::string& sensor,
                                          const std::vector<float>& image)
{
    Impl::Sensor& s = impl_->find(sensor);
    if (!s.ground_truth.valid()) {
        recon::ImageShape grid = s.setup.image_shape;
        if (grid.nx <= 0 || grid.ny <= 0) {
            grid = s.setup.system.geometry == "parallel2d"
                       ? recon::ImageShape{s.setup.system.ny, s.setup.system.nx}
                       : recon::ImageShape{1, static_cast<index_t>(image.size())};
        }
        s.ground_truth =
            s.group.create_frames("ground_truth", hdf5::Dtype::float32, {grid.ny, grid.nx});
    }
    const hdf5::Shape shape = s.ground_truth.shape();
    if (static_cast<std::int64_t>(image.size()) != shape[1] * shape[2]) {
        s.ground_truth.fail("image has " + std::to_string(image.size()) + " pixels, expected " +
                            hdf5::to_string({shape[1], shape[2]}));
    }
    s.ground_truth.append(image);
}

std::int64_t RecordingWriter::frames(const std::string& sensor) const
{
    return impl_->find(sensor).frames;
}

void RecordingWriter::flush()
{
    if (!impl_->open) throw std::runtime_error(impl_->path + ": recording writer is closed");
    impl_->file.flush();
}

void RecordingWriter::close()
{
    if (!impl_->open) return;
    impl_->open = false;
    for (Impl::Sensor& s : impl_->sensors) {
        // A sensor whose frame size never became known (a matrix geometry
        // without frames) still gets its data set, with no frames.
        if (!s.data.valid()) impl_->create_data(s, 0);
    }
    impl_->file.flush();
    impl_->sensors.clear();  // handles close before the file
    impl_->file = hdf5::File{};
}

}  // namespace recon::sensors
