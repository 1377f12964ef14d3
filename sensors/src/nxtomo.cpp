// NXtomo import: a projection stack becomes one sinogram frame per detector
// row (recording.hpp describes the mapping).

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "sensor_source.hpp"
#include "sensors/preprocess.hpp"

namespace recon::sensors {

namespace {

enum ImageKey : std::int64_t { projection = 0, flat_field = 1, dark_field = 2 };

class NxtomoSensor final : public SensorSource {
public:
    NxtomoSensor(const hdf5::File& file, const std::string& entry);

    const SensorInfo& info() const override { return info_; }
    std::vector<float> read(std::int64_t k) const override;
    std::optional<std::vector<float>> ground_truth(std::int64_t) const override
    {
        return std::nullopt;
    }
    const std::vector<std::int64_t>& timestamps() const override { return timestamps_; }

private:
    std::vector<std::int64_t> read_image_keys(const hdf5::Group& detector) const;
    std::vector<double> read_angles(const hdf5::Group& entry) const;
    /// Mean of the images whose key is `key` ([rows][cols]); empty if none.
    std::vector<float> average(const std::vector<std::int64_t>& keys, std::int64_t key) const;

    SensorInfo info_;
    hdf5::Dataset data_;
    std::int64_t images_ = 0, rows_ = 0, cols_ = 0;
    std::vector<std::int64_t> projections_;  // image indices of the projections, in order
    std::vector<float> dark_, flat_;  // [rows][cols] or empty
    std::vector<std::int64_t> timestamps_;
};

NxtomoSensor::NxtomoSensor(const hdf5::File& file, const std::string& entry_path)
{
    const hdf5::Group entry = file.open_group(entry_path);
    const hdf5::Group detector = entry.open_group("instrument/detector");
    data_ = detector.open_dataset("data");
    expect_numeric(data_);
    const hdf5::Shape shape = data_.shape();
    if (shape.size() != 3) {
        data_.fail("expected rank 3 [images, rows, cols], found shape " + hdf5::to_string(shape));
    }
    images_ = shape[0];
    rows_ = shape[1];
    cols_ = shape[2];
    if (images_ <= 0 || rows_ <= 0 || cols_ <= 0) {
        data_.fail("empty image stack of shape " + hdf5::to_string(shape));
    }

    const std::vector<std::int64_t> keys = read_image_keys(detector);
    const std::vector<double> all_angles = read_angles(entry);
    std::vector<double> angles;
    for (std::int64_t i = 0; i < images_; ++i) {
        if (keys[static_cast<std::size_t>(i)] != projection) continue;
        projections_.push_back(i);
        angles.push_back(all_angles[static_cast<std::size_t>(i)]);
    }
    if (projections_.empty()) data_.fail("no projection images (image_key 0)");
    dark_ = average(keys, dark_field);
    flat_ = average(keys, flat_field);

    info_.name = "nxtomo";
    info_.system.geometry = "parallel2d";
    info_.system.nx = info_.system.ny = info_.system.bins = static_cast<index_t>(cols_);
    info_.system.views = static_cast<index_t>(projections_.size());
    info_.system.angles_deg = std::move(angles);
    info_.system.center_offset = 0.0;
    info_.frames = rows_;
    info_.frame_shape = {static_cast<std::int64_t>(projections_.size()), cols_};
    info_.measurements = hdf5::element_count(info_.frame_shape);
    info_.dtype = hdf5::to_string(data_.dtype());
    info_.raw_counts = true;
    info_.has_dark = !dark_.empty();
    info_.has_flat = !flat_.empty();
    timestamps_.assign(static_cast<std::size_t>(rows_), 0);
}

/// image_key [images]; without one every image is a projection.
std::vector<std::int64_t> NxtomoSensor::read_image_keys(const hdf5::Group& detector) const
{
    if (!detector.exists("image_key")) {
        return std::vector<std::int64_t>(static_cast<std::size_t>(images_), projection);
    }
    const hdf5::Dataset d = detector.open_dataset("image_key");
    if (!hdf5::is_integer(d.dtype())) {
        d.fail(std::string{"expected integer keys, found dtype "} + hdf5::to_string(d.dtype()));
    }
    expect_shape(d, {images_}, "(one key per image)");
    return d.read<std::int64_t>();
}

/// rotation_angle [images] in degrees (converted when its units say radians).
std::vector<double> NxtomoSensor::read_angles(const hdf5::Group& entry) const
{
    const hdf5::Dataset d = entry.open_dataset("sample/rotation_angle");
    expect_numeric(d);
    expect_shape(d, {images_}, "(one angle per image)");
    std::vector<double> angles = d.read<double>();
    if (d.has_attribute("units") && d.attribute_info("units").dtype == hdf5::Dtype::string) {
        const std::string units = d.read_string_attribute("units");
        if (units == "rad" || units == "radian" || units == "radians") {
            for (double& a : angles) a *= 180.0 / std::numbers::pi;
        }
    }
    for (std::size_t i = 0; i < angles.size(); ++i) {
        if (!std::isfinite(angles[i])) d.fail("angle " + std::to_string(i) + " is not finite");
    }
    return angles;
}

std::vector<float> NxtomoSensor::average(const std::vector<std::int64_t>& keys,
                                         std::int64_t key) const
{
    const auto size = static_cast<std::size_t>(rows_ * cols_);
    std::vector<double> sum(size, 0.0);
    std::size_t count = 0;
    for (std::int64_t i = 0; i < images_; ++i) {
        if (keys[static_cast<std::size_t>(i)] != key) continue;
        const std::vector<float> image = data_.read_slab<float>({i, 0, 0}, {1, rows_, cols_});
        for (std::size_t p = 0; p < size; ++p) sum[p] += image[p];
        ++count;
    }
    if (count == 0) return {};
    std::vector<float> mean(size);
    for (std::size_t p = 0; p < size; ++p) {
        mean[p] = static_cast<float>(sum[p] / static_cast<double>(count));
    }
    return mean;
}

std::vector<float> NxtomoSensor::read(std::int64_t row) const
{
    // Row `row` of every image, then the projections' rows in order.
    const std::vector<float> slab = data_.read_slab<float>({0, row, 0}, {images_, 1, cols_});
    const auto cols = static_cast<std::size_t>(cols_);
    const std::size_t views = projections_.size();
    std::vector<float> frame(views * cols);
    std::vector<float> dark, flat;
    if (!dark_.empty()) dark.resize(frame.size());
    if (!flat_.empty()) flat.resize(frame.size());
    const std::size_t row_start = static_cast<std::size_t>(row) * cols;
    for (std::size_t v = 0; v < views; ++v) {
        const std::size_t image = static_cast<std::size_t>(projections_[v]);
        for (std::size_t c = 0; c < cols; ++c) {
            frame[v * cols + c] = slab[image * cols + c];
            if (!dark.empty()) dark[v * cols + c] = dark_[row_start + c];
            if (!flat.empty()) flat[v * cols + c] = flat_[row_start + c];
        }
    }
    counts_to_line_integrals(frame, dark, flat, frame);
    check_finite(frame, data_, info_.name, row);
    return frame;
}

}  // namespace

std::unique_ptr<SensorSource> open_nxtomo(const hdf5::File& file, const std::string& entry)
{
    return std::make_unique<NxtomoSensor>(file, entry);
}

}  // namespace recon::sensors
