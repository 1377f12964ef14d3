#include "pipeline/hdf5_output.hpp"

#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

namespace recon::pipeline {

namespace {

const std::string root = "/entry/reconstruction";

std::string group_path(const std::string& sensor) { return root + "/" + sensor; }

}  // namespace

Hdf5OutputWriter::Hdf5OutputWriter(const std::string& path, OutputParameters parameters)
    : path_{path}, parameters_{std::move(parameters)}, file_{hdf5::File::create(path)}
{
    const hdf5::Group params = file_.require_group(root + "/parameters");
    params.write_string_dataset("config", parameters_.config_text);
    params.write_string_dataset("version", parameters_.version);
    params.write_attribute("device", parameters_.device);
    file_.open_group("/entry").write_attribute("NX_class", "NXentry");
}

Hdf5OutputWriter::SensorGroup& Hdf5OutputWriter::sensor(const Reconstruction& frame)
{
    if (const auto it = sensors_.find(frame.sensor); it != sensors_.end()) {
        const auto shape = it->second.data.shape();
        if (shape[1] != frame.shape.ny || shape[2] != frame.shape.nx) {
            it->second.data.fail("expected images of " + hdf5::to_string({shape[1], shape[2]}) +
                                 ", found " + hdf5::to_string({frame.shape.ny, frame.shape.nx}));
        }
        return it->second;
    }
    SensorGroup s;
    s.group = file_.require_group(group_path(frame.sensor));
    const hdf5::Group& group = s.group;
    s.data = group.create_frames("data", hdf5::Dtype::float32,
                                 {frame.shape.ny, frame.shape.nx});
    s.data.write_attribute("image_shape",
                           std::vector<std::int64_t>{frame.shape.ny, frame.shape.nx});
    const hdf5::Group timing = group.require_group("timing");
    timing.write_attribute("budget_ms", parameters_.budget_ms);
    timing.write_attribute("device", parameters_.device);
    return sensors_.emplace(frame.sensor, std::move(s)).first->second;
}

void Hdf5OutputWriter::write_image(const Reconstruction& frame)
{
    SensorGroup& s = sensor(frame);
    s.data.append(std::span<const float>{frame.image});
    s.row_of[frame.frame_id] = s.rows++;
}

template <hdf5::Element T>
void Hdf5OutputWriter::SensorGroup::write_row(const std::string& name, std::int64_t row, T value)
{
    auto it = columns.find(name);
    if (it == columns.end()) {
        hdf5::DatasetOptions options;
        options.max_shape = {hdf5::unlimited};
        options.chunk = {1024};
        it = columns.emplace(name, group.create_dataset(name, hdf5::dtype_of<T>(), {0}, options))
                 .first;
    }
    const hdf5::Dataset& d = it->second;
    if (d.shape()[0] <= row) d.resize({row + 1});
    d.write_slab<T>({row}, {1}, std::span<const T>{&value, 1});
}

void Hdf5OutputWriter::write_record(const Reconstruction& frame)
{
    SensorGroup& s = sensor(frame);
    const auto found = s.row_of.find(frame.frame_id);
    if (found == s.row_of.end()) {
        s.data.fail("frame " + std::to_string(frame.frame_id) + " recorded before its image");
    }
    const std::int64_t row = found->second;
    s.row_of.erase(found);

    s.write_row<std::int64_t>("timing/frame_id", row, frame.frame_id);
    s.write_row<std::int64_t>("timing/t_arrival_ns", row, frame.t_arrival_ns);
    for (const Stage stage : all_stages) {
        s.write_row<double>("timing/" + std::string{to_string(stage)} + "_ms", row,
                            frame.times[stage]);
    }
    s.write_row<double>("timing/total_ms", row, frame.times.total_ms);
    s.write_row<std::int32_t>("timing/iterations", row, frame.result.iterations);
    s.write_row<double>("timing/rel_gradient", row, frame.result.rel_gradient);
    s.write_row<std::uint8_t>("timing/deadline_missed", row, frame.deadline_missed ? 1 : 0);
    s.write_row<std::int32_t>("timing/status", row,
                              static_cast<std::int32_t>(frame.result.status));
    if (frame.quality) {
        s.write_row<double>("quality/psnr_db", row, frame.quality->psnr_db);
        if (frame.quality->ssim) s.write_row<double>("quality/ssim", row, *frame.quality->ssim);
    }
    file_.flush();
}

void Hdf5OutputWriter::close()
{
    if (!file_.valid()) return;
    file_.flush();
    sensors_.clear();
    file_ = hdf5::File{};
}

}  // namespace recon::pipeline

