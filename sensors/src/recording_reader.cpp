// Reading recordings: format detection, and our own layout (recording.hpp).

#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include "sensor_source.hpp"
#include "sensors/preprocess.hpp"
#include "sensors/recording.hpp"

namespace recon::sensors {

namespace {

namespace fs = std::filesystem;

// --- attributes ---------------------------------------------------------------

/// A whole number stored as an integer (or an integral float) attribute;
/// `fallback` when absent, or an error when there is none.
std::int64_t integer_attribute(const hdf5::Group& g, const std::string& name,
                               std::optional<std::int64_t> fallback = std::nullopt)
{
    if (!g.has_attribute(name)) {
        if (fallback) return *fallback;
        g.fail("attribute '" + name + "' not found");
    }
    const hdf5::TypeInfo info = g.attribute_info(name);
    if (hdf5::element_count(info.shape) != 1) {
        g.fail("attribute '" + name + "' must be one number, found shape " +
               hdf5::to_string(info.shape));
    }
    if (hdf5::is_integer(info.dtype)) return g.read_scalar_attribute<std::int64_t>(name);
    if (hdf5::is_floating(info.dtype)) {
        const double v = g.read_scalar_attribute<double>(name);
        if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) {
            return static_cast<std::int64_t>(v);
        }
        g.fail("attribute '" + name + "' = " + std::to_string(v) + " is not a whole number");
    }
    g.fail("attribute '" + name + "' has dtype " + hdf5::to_string(info.dtype) +
           ", expected an integer");
}

/// A positive integer that fits an index.
index_t positive_attribute(const hdf5::Group& g, const std::string& name,
                           std::optional<std::int64_t> fallback = std::nullopt)
{
    const std::int64_t v = integer_attribute(g, name, fallback);
    if (v <= 0 || v > std::numeric_limits<index_t>::max()) {
        g.fail("attribute '" + name + "' = " + std::to_string(v) + " must be positive");
    }
    return static_cast<index_t>(v);
}

double real_attribute(const hdf5::Group& g, const std::string& name, double fallback)
{
    if (!g.has_attribute(name)) return fallback;
    const hdf5::TypeInfo info = g.attribute_info(name);
    if (hdf5::element_count(info.shape) != 1 ||
        !(hdf5::is_integer(info.dtype) || hdf5::is_floating(info.dtype))) {
        g.fail("attribute '" + name + "' must be one number, found " + hdf5::to_string(info.dtype) +
               " of shape " + hdf5::to_string(info.shape));
    }
    const double v = g.read_scalar_attribute<double>(name);
    if (!std::isfinite(v)) g.fail("attribute '" + name + "' is not finite");
    return v;
}

std::string text_attribute(const hdf5::Group& g, const std::string& name,
                           std::optional<std::string> fallback = std::nullopt)
{
    if (!g.has_attribute(name)) {
        if (fallback) return *fallback;
        g.fail("attribute '" + name + "' not found");
    }
    return g.read_string_attribute(name);
}

// --- our layout -------------------------------------------------------------------

std::string leaf(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

/// One sensor group of our layout, validated when opened.
class RecordedSensor final : public SensorSource {
public:
    explicit RecordedSensor(const hdf5::Group& group);

    const SensorInfo& info() const override { return info_; }
    std::vector<float> read(std::int64_t k) const override;
    std::optional<std::vector<float>> ground_truth(std::int64_t k) const override;
    const std::vector<std::int64_t>& timestamps() const override { return timestamps_; }

private:
    void read_geometry(const hdf5::Group& g);
    void read_parallel2d(const hdf5::Group& g);
    void read_timestamps(const hdf5::Group& g);
    std::vector<float> read_calibration(const hdf5::Group& g, const std::string& name);
    void read_ground_truth(const hdf5::Group& g);
    void read_notes(const hdf5::Group& g);

    SensorInfo info_;
    hdf5::Dataset data_;
    hdf5::Dataset ground_truth_;
    std::vector<std::int64_t> timestamps_;
    std::vector<float> dark_, flat_;
};

RecordedSensor::RecordedSensor(const hdf5::Group& g)
{
    info_.name = leaf(g.path());
    data_ = g.open_dataset("data");
    const hdf5::Dtype dtype = data_.dtype();
    if (dtype != hdf5::Dtype::float32 && dtype != hdf5::Dtype::float64 &&
        dtype != hdf5::Dtype::uint16 && dtype != hdf5::Dtype::uint32) {
        data_.fail(std::string{"expected float32, float64, uint16 or uint32 values, found "} +
                   hdf5::to_string(dtype));
    }
    info_.dtype = hdf5::to_string(dtype);
    const std::string quantity =
        text_attribute(g, "quantity", hdf5::is_integer(dtype) ? "counts" : "line_integral");
    if (quantity != "counts" && quantity != "line_integral") {
        g.fail("attribute 'quantity' = '" + quantity + "' (expected counts or line_integral)");
    }
    info_.raw_counts = quantity == "counts";

    read_geometry(g);
    read_timestamps(g);
    dark_ = read_calibration(g, "dark");
    flat_ = read_calibration(g, "flat");
    info_.has_dark = !dark_.empty();
    info_.has_flat = !flat_.empty();
    read_ground_truth(g);
    read_notes(g);
}

/// Text attributes other than the model's parameters (provenance).
void RecordedSensor::read_notes(const hdf5::Group& g)
{
    for (const std::string& name : g.attribute_names()) {
        static const std::set<std::string> known = {
            "geometry",        "quantity", "nx",   "ny",  "bins", "views",       "center_offset",
            "angle_range_deg", "rows",     "cols", "nnz", "seed", "matrix_file", "matrix_group"};
        const hdf5::TypeInfo type = g.attribute_info(name);
        if (!known.contains(name) && type.dtype == hdf5::Dtype::string &&
            hdf5::element_count(type.shape) == 1) {
            info_.notes[name] = g.read_string_attribute(name);
        }
    }
}

void RecordedSensor::read_geometry(const hdf5::Group& g)
{
    recon::SystemSpec& spec = info_.system;
    if (!g.has_attribute("geometry")) {
        g.fail("attribute 'geometry' not found (expected parallel2d, synthetic or matrix)");
    }
    spec.geometry = g.read_string_attribute("geometry");
    const hdf5::Shape shape = data_.shape();
    const bool parallel = spec.geometry == "parallel2d";
    if (!parallel && spec.geometry != "synthetic" && spec.geometry != "matrix") {
        g.fail("unknown geometry '" + spec.geometry +
               "' (expected parallel2d, synthetic or matrix)");
    }
    const std::size_t rank = parallel ? 3 : 2;
    if (shape.size() != rank) {
        data_.fail("expected rank " + std::to_string(rank) +
                   (parallel ? " [frames, views, bins]" : " [frames, m]") + " for geometry " +
                   spec.geometry + ", found shape " + hdf5::to_string(shape));
    }
    info_.frames = shape[0];
    info_.frame_shape.assign(shape.begin() + 1, shape.end());
    info_.measurements = hdf5::element_count(info_.frame_shape);
    const bool no_frames_yet = info_.frames == 0;  // a frame size may never have been known
    if ((info_.measurements <= 0 && !no_frames_yet) ||
        info_.measurements > std::numeric_limits<index_t>::max()) {
        data_.fail("frames of shape " + hdf5::to_string(info_.frame_shape) +
                   " are empty or too large");
    }

    if (parallel) {
        read_parallel2d(g);
    } else if (spec.geometry == "synthetic") {
        spec.rows = positive_attribute(g, "rows");
        spec.cols = positive_attribute(g, "cols");
        spec.nnz = integer_attribute(g, "nnz");
        if (spec.nnz <= 0) g.fail("attribute 'nnz' must be positive");
        spec.seed = g.has_attribute("seed") ? g.read_scalar_attribute<std::uint64_t>("seed") : 1;
        if (spec.rows != info_.measurements) {
            data_.fail("frames have " + std::to_string(info_.measurements) +
                       " values but attribute rows = " + std::to_string(spec.rows));
        }
    } else {
        fs::path matrix = text_attribute(g, "matrix_file");
        if (matrix.empty()) g.fail("attribute 'matrix_file' is empty");
        if (matrix.is_relative()) matrix = fs::path{g.file_name()}.parent_path() / matrix;
        spec.matrix_file = matrix.string();
        spec.matrix_group = text_attribute(g, "matrix_group", "/matrix");
    }
}

void RecordedSensor::read_parallel2d(const hdf5::Group& g)
{
    recon::SystemSpec& spec = info_.system;
    const auto views = static_cast<index_t>(info_.frame_shape[0]);
    const auto bins = static_cast<index_t>(info_.frame_shape[1]);
    spec.bins = bins;
    spec.views = views;
    if (positive_attribute(g, "bins", bins) != bins) {
        g.fail("attribute 'bins' = " + std::to_string(integer_attribute(g, "bins")) +
               " but data has " + std::to_string(bins) + " bins");
    }
    if (positive_attribute(g, "views", views) != views) {
        g.fail("attribute 'views' = " + std::to_string(integer_attribute(g, "views")) +
               " but data has " + std::to_string(views) + " views");
    }
    spec.nx = positive_attribute(g, "nx", bins);
    spec.ny = positive_attribute(g, "ny", spec.nx);
    spec.center_offset = real_attribute(g, "center_offset", 0.0);
    spec.angle_range_deg = real_attribute(g, "angle_range_deg", 180.0);

    const hdf5::Dataset angles = g.open_dataset("rotation_angle");
    expect_numeric(angles);
    if (angles.rank() != 1) {
        angles.fail("expected a 1-D array [views], found shape " + hdf5::to_string(angles.shape()));
    }
    if (angles.shape()[0] != views) {
        angles.fail("has " + std::to_string(angles.shape()[0]) + " angles but data has " +
                    std::to_string(views) + " views (shape " + hdf5::to_string(data_.shape()) +
                    ")");
    }
    spec.angles_deg = angles.read<double>();
    for (std::size_t v = 0; v < spec.angles_deg.size(); ++v) {
        if (!std::isfinite(spec.angles_deg[v])) {
            angles.fail("angle " + std::to_string(v) + " is not finite");
        }
    }
}

void RecordedSensor::read_timestamps(const hdf5::Group& g)
{
    if (!g.exists("timestamp_ns")) {
        timestamps_.assign(static_cast<std::size_t>(info_.frames), 0);
        return;
    }
    const hdf5::Dataset d = g.open_dataset("timestamp_ns");
    if (!hdf5::is_integer(d.dtype())) {
        d.fail(std::string{"expected int64 nanoseconds, found dtype "} +
               hdf5::to_string(d.dtype()));
    }
    if (d.rank() != 1 || d.shape()[0] != info_.frames) {
        d.fail("expected " + std::to_string(info_.frames) +
               " timestamps (one per frame), found shape " + hdf5::to_string(d.shape()));
    }
    timestamps_ = d.read<std::int64_t>();
}

std::vector<float> RecordedSensor::read_calibration(const hdf5::Group& g, const std::string& name)
{
    if (!g.exists(name)) return {};
    const hdf5::Dataset d = g.open_dataset(name);
    if (!info_.raw_counts) {
        d.fail("present, but the data are line integrals (quantity = counts marks intensities)");
    }
    expect_numeric(d);
    const hdf5::Shape shape = d.shape();
    if (shape != info_.frame_shape && shape != hdf5::Shape{info_.measurements}) {
        d.fail("expected shape " + hdf5::to_string(info_.frame_shape) + " (one frame), found " +
               hdf5::to_string(shape));
    }
    std::vector<float> values = d.read<float>();
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!std::isfinite(values[i])) d.fail("value " + std::to_string(i) + " is not finite");
    }
    return values;
}

void RecordedSensor::read_ground_truth(const hdf5::Group& g)
{
    if (!g.exists("ground_truth")) return;
    ground_truth_ = g.open_dataset("ground_truth");
    expect_numeric(ground_truth_);
    const hdf5::Shape shape = ground_truth_.shape();
    const recon::SystemSpec& spec = info_.system;
    if (shape.size() != 3 || shape[0] != info_.frames) {
        ground_truth_.fail("expected [" + std::to_string(info_.frames) +
                           ", ny, nx] (one image per frame), found " + hdf5::to_string(shape));
    }
    if (spec.geometry == "parallel2d" && (shape[1] != spec.ny || shape[2] != spec.nx)) {
        ground_truth_.fail("expected images of " + hdf5::to_string({spec.ny, spec.nx}) +
                           " (ny, nx), found " + hdf5::to_string({shape[1], shape[2]}));
    }
    if (spec.geometry == "synthetic" && shape[1] * shape[2] != spec.cols) {
        ground_truth_.fail("images of " + hdf5::to_string({shape[1], shape[2]}) +
                           " do not have cols = " + std::to_string(spec.cols) + " pixels");
    }
    info_.has_ground_truth = true;
    info_.ground_truth_shape = {shape[1], shape[2]};
}

std::vector<float> RecordedSensor::read(std::int64_t k) const
{
    hdf5::Shape offset(info_.frame_shape.size() + 1, 0);
    offset[0] = k;
    hdf5::Shape count{1};
    count.insert(count.end(), info_.frame_shape.begin(), info_.frame_shape.end());
    std::vector<float> frame = data_.read_slab<float>(offset, count);
    if (info_.raw_counts) counts_to_line_integrals(frame, dark_, flat_, frame);
    check_finite(frame, data_, info_.name, k);
    return frame;
}

std::optional<std::vector<float>> RecordedSensor::ground_truth(std::int64_t k) const
{
    if (!info_.has_ground_truth) return std::nullopt;
    const auto& s = info_.ground_truth_shape;
    return ground_truth_.read_slab<float>({k, 0, 0}, {1, s[0], s[1]});
}

/// The top-level group holding an NXtomo detector, or "".
std::string find_nxtomo_entry(const hdf5::File& file)
{
    if (file.has_dataset("/entry/instrument/detector/data")) return "/entry";
    for (const std::string& name : file.children()) {
        if (file.has_dataset("/" + name + "/instrument/detector/data")) return "/" + name;
    }
    return "";
}

}  // namespace

std::vector<std::unique_ptr<SensorSource>> open_recording_sensors(const hdf5::File& file)
{
    const hdf5::Group sensors = file.open_group("/entry/sensors");
    std::vector<std::unique_ptr<SensorSource>> out;
    for (const std::string& name : sensors.children()) {
        if (sensors.has_group(name)) {
            out.push_back(std::make_unique<RecordedSensor>(sensors.open_group(name)));
        }
    }
    if (out.empty()) sensors.fail("no sensor groups in this recording");
    return out;
}

// --- RecordingReader ----------------------------------------------------------------

struct RecordingReader::Impl {
    std::string path;
    std::string format;
    hdf5::File file;
    std::vector<std::unique_ptr<SensorSource>> sources;
    std::vector<SensorInfo> infos;

    const SensorSource& find(const std::string& name) const
    {
        for (const auto& s : sources) {
            if (s->info().name == name) return *s;
        }
        std::string known;
        for (const auto& s : sources) known += (known.empty() ? "" : ", ") + s->info().name;
        throw std::runtime_error(path + ": no sensor '" + name + "' (sensors: " + known + ")");
    }
};

RecordingReader::RecordingReader(const std::string& path) : impl_{std::make_unique<Impl>()}
{
    impl_->path = path;
    impl_->file = hdf5::File::open(path);
    if (impl_->file.has_group("/entry/sensors")) {
        impl_->format = "recording";
        impl_->sources = open_recording_sensors(impl_->file);
    } else if (const std::string entry = find_nxtomo_entry(impl_->file); !entry.empty()) {
        impl_->format = "nxtomo";
        impl_->sources.push_back(open_nxtomo(impl_->file, entry));
    } else {
        throw std::runtime_error(path +
                                 ": neither a recording (/entry/sensors/<name>/data) nor "
                                 "an NXtomo scan (/entry/instrument/detector/data)");
    }
    for (const auto& s : impl_->sources) impl_->infos.push_back(s->info());
}

RecordingReader::~RecordingReader() = default;
RecordingReader::RecordingReader(RecordingReader&&) noexcept = default;
RecordingReader& RecordingReader::operator=(RecordingReader&&) noexcept = default;

const std::string& RecordingReader::path() const { return impl_->path; }
const std::string& RecordingReader::format() const { return impl_->format; }
const std::vector<SensorInfo>& RecordingReader::sensors() const { return impl_->infos; }

const SensorInfo& RecordingReader::sensor(const std::string& name) const
{
    return impl_->find(name).info();
}

Frame RecordingReader::read_frame(const std::string& sensor, std::int64_t k) const
{
    const SensorSource& source = impl_->find(sensor);
    const std::int64_t frames = source.info().frames;
    if (k < 0 || k >= frames) {
        throw std::runtime_error(impl_->path + ": sensor '" + sensor + "': frame " +
                                 std::to_string(k) + " outside [0, " + std::to_string(frames) +
                                 ")");
    }
    Frame frame;
    frame.sensor = sensor;
    frame.frame_id = k;
    frame.timestamp_ns = source.timestamps()[static_cast<std::size_t>(k)];
    frame.data = source.read(k);
    return frame;
}

std::optional<std::vector<float>> RecordingReader::ground_truth(const std::string& sensor,
                                                                std::int64_t k) const
{
    const SensorSource& source = impl_->find(sensor);
    if (k < 0 || k >= source.info().frames) {
        throw std::runtime_error(impl_->path + ": sensor '" + sensor + "': ground truth " +
                                 std::to_string(k) + " outside [0, " +
                                 std::to_string(source.info().frames) + ")");
    }
    return source.ground_truth(k);
}

const std::vector<std::int64_t>& RecordingReader::timestamps(const std::string& sensor) const
{
    return impl_->find(sensor).timestamps();
}

}  // namespace recon::sensors
