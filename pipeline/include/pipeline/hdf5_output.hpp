#pragma once
// The HDF5 output file of DESIGN §6, written as frames arrive:
//   /entry/reconstruction/<sensor>/data     [frames, ny, nx] float32, one chunk per frame
//   /entry/reconstruction/<sensor>/timing/  frame_id, t_arrival_ns, queue_ms, upload_ms,
//                                           solve_ms, download_ms, write_ms, total_ms,
//                                           iterations, rel_gradient, deadline_missed,
//                                           status; attributes budget_ms, device
//   /entry/reconstruction/<sensor>/quality/ psnr_db, ssim (when ground truth is known)
//   /entry/reconstruction/parameters/       config (effective INI text), version
// Row k of every per-frame dataset of a sensor describes image k of its data.

#include <map>
#include <string>

#include "pipeline/sink.hpp"
#include "recon/hdf5.hpp"

namespace recon::pipeline {

struct OutputParameters {
    std::string config_text;  // the effective configuration (INI)
    std::string version;      // program version
    std::string device;       // device name the frames were solved on
    double budget_ms = 0.0;
};

class Hdf5OutputWriter final : public FrameSink {
public:
    /// Creates (replaces) `path` and writes the parameters group. Throws
    /// std::runtime_error naming the file.
    Hdf5OutputWriter(const std::string& path, OutputParameters parameters);

    /// Appends the image to its sensor's data (creating the sensor's group
    /// on its first frame; later frames must have the same shape).
    void write_image(const Reconstruction& frame) override;
    /// Writes the frame's timing (and quality) row next to its image row.
    void write_record(const Reconstruction& frame) override;
    /// Flushes and closes the file.
    void close() override;

    const std::string& path() const { return path_; }

private:
    struct SensorGroup {
        hdf5::Group group;
        hdf5::Dataset data;
        std::int64_t rows = 0;                        // images appended
        std::map<std::int64_t, std::int64_t> row_of;  // frame_id -> row, until recorded
        std::map<std::string, hdf5::Dataset> columns; // per-frame datasets by relative path

        /// Writes `value` at `row` of the 1-D per-frame dataset `name`
        /// (created on first use, grown as needed).
        template <hdf5::Element T>
        void write_row(const std::string& name, std::int64_t row, T value);
    };
    SensorGroup& sensor(const Reconstruction& frame);

    std::string path_;
    OutputParameters parameters_;
    hdf5::File file_;
    std::map<std::string, SensorGroup> sensors_;
};

}  // namespace recon::pipeline
