#pragma once
// HDF5 recordings (DESIGN §6): our own layout, one group per sensor under
// /entry/sensors/<name>, and NXtomo scans imported as slice frames.
//
// Our layout, per sensor group /entry/sensors/<name>:
//   data            [frames, views, bins] (parallel2d) or [frames, m] (matrix,
//                   synthetic); float32 line integrals, or uint16 / uint32 raw
//                   counts (float64 is read too); one chunk per frame
//   timestamp_ns    [frames] int64 (optional when reading: absent means 0)
//   rotation_angle  [views] float64, degrees (parallel2d)
//   dark, flat      [views, bins] or [m], optional (raw counts only)
//   ground_truth    [frames, ny, nx] float32, optional (simulated data)
//   attributes      geometry = "parallel2d" | "synthetic" | "matrix" and the
//                   parameters of that model: nx, ny, bins, views,
//                   center_offset, angle_range_deg (parallel2d); rows, cols,
//                   nnz, seed (synthetic); matrix_file, matrix_group (matrix;
//                   a relative matrix_file is relative to the recording's
//                   directory). Optional quantity = "line_integral" | "counts"
//                   (default: counts for integer data, line integrals for
//                   floating-point data). Other attributes are kept as notes.
//
// NXtomo (read only): /entry/instrument/detector/data [frames, rows, cols]
// with image_key (0 projection, 1 flat, 2 dark, others skipped) and
// /entry/sample/rotation_angle [frames] in degrees. Darks and flats are
// averaged; detector row r of the projections becomes frame r of the one
// sensor "nxtomo": a sinogram [views x cols] with geometry parallel2d,
// nx = ny = bins = cols and the angles of the projection images. Frames of
// an NXtomo scan have timestamp 0. The entry may have another name than
// /entry: the first top-level group holding instrument/detector/data is used.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recon/system_model.hpp"
#include "sensors/frame.hpp"

namespace recon::sensors {

/// What a recording says about one sensor.
struct SensorInfo {
    std::string name;
    recon::SystemSpec system;  // geometry and its parameters (from attributes)
    std::int64_t frames = 0;
    std::int64_t measurements = 0;  // m per frame
    std::string dtype;  // "float32", "float64", "uint16" or "uint32" as stored
    bool has_ground_truth = false;  // /entry/sensors/<name>/ground_truth [frames, ny, nx]

    bool raw_counts = false;  // stored values are counts, preprocessed on read
    bool has_dark = false;  // dark / flat fields present (raw counts)
    bool has_flat = false;
    std::vector<std::int64_t> frame_shape;  // data shape without the frame axis
    std::vector<std::int64_t> ground_truth_shape;  // [ny, nx] when has_ground_truth
    std::map<std::string, std::string> notes;  // other text attributes of the group
};

/// Reads frames from a recording file. Every error is a std::runtime_error
/// with one line naming the file, the dataset, what was expected and what
/// was found. Raw counts are turned into line integrals -log((I - dark) /
/// (flat - dark)) (see preprocess.hpp). Reads may come from several threads
/// (the HDF5 library serializes them).
class RecordingReader {
public:
    /// Opens and validates the file (ours or NXtomo, detected by layout).
    explicit RecordingReader(const std::string& path);
    ~RecordingReader();
    RecordingReader(RecordingReader&&) noexcept;
    RecordingReader& operator=(RecordingReader&&) noexcept;

    const std::string& path() const;
    /// "recording" or "nxtomo".
    const std::string& format() const;
    const std::vector<SensorInfo>& sensors() const;
    /// Throws when the recording has no sensor of that name.
    const SensorInfo& sensor(const std::string& name) const;

    /// Frame k of a sensor, preprocessed; throws on NaN/Inf in the result
    /// (naming the sensor and frame) and on k outside [0, frames).
    Frame read_frame(const std::string& sensor, std::int64_t k) const;
    /// Ground truth image k ([ny][nx] flattened), when the recording has it.
    std::optional<std::vector<float>> ground_truth(const std::string& sensor, std::int64_t k) const;
    /// All frame timestamps of a sensor (ns; zeros when not recorded).
    const std::vector<std::int64_t>& timestamps(const std::string& sensor) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// What a recording writer needs per sensor before frames arrive.
struct SensorSetup {
    std::string name;
    recon::SystemSpec system;
    std::string dtype = "float32";  // or "uint16" / "uint32" raw counts
    std::vector<float> dark, flat;  // [m] each, optional (raw counts)

    /// m per frame; 0: from the system (parallel2d views * bins, synthetic
    /// rows; matrix: the dark/flat length, else the first frame's length).
    std::int64_t measurements = 0;
    /// Ground-truth grid; 0 x 0: (system.ny, system.nx) for parallel2d, else
    /// [1, n] with n the first image's length.
    recon::ImageShape image_shape{0, 0};
    /// Extra text attributes written on the sensor group (provenance).
    std::map<std::string, std::string> notes;
};

/// Writes our recording layout; one chunk per frame, frames appended.
/// Not thread-safe: one writer thread (or the caller's lock).
class RecordingWriter {
public:
    /// Creates (replaces) the file and every sensor group. Throws
    /// std::invalid_argument naming the sensor for a bad setup (unknown
    /// geometry or dtype, duplicate name, dark/flat of the wrong length).
    RecordingWriter(const std::string& path, const std::vector<SensorSetup>& sensors);
    ~RecordingWriter();
    RecordingWriter(RecordingWriter&&) noexcept;
    RecordingWriter& operator=(RecordingWriter&&) noexcept;

    /// Appends a float32 frame (line integrals).
    void append(const std::string& sensor, std::int64_t timestamp_ns,
                const std::vector<float>& data);
    /// Appends a raw-count frame (dtype uint16/uint32 sensors); counts above
    /// the dtype's range are an error, not clamped.
    void append_counts(const std::string& sensor, std::int64_t timestamp_ns,
                       const std::vector<std::uint32_t>& counts);
    /// Appends ground truth image k of a sensor.
    void append_ground_truth(const std::string& sensor, const std::vector<float>& image);
    /// Frames appended so far for a sensor.
    std::int64_t frames(const std::string& sensor) const;
    /// Writes buffered data to disk (the file stays open).
    void flush();
    /// Flushes and closes (also done by the destructor). Appending after
    /// close is an error.
    void close();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace recon::sensors
