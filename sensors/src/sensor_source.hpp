#pragma once
// One sensor's frames as a file stores them: our recording layout or an
// NXtomo scan. RecordingReader holds one source per sensor.

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recon/hdf5.hpp"
#include "sensors/recording.hpp"

namespace recon::sensors {

class SensorSource {
public:
    virtual ~SensorSource() = default;
    virtual const SensorInfo& info() const = 0;
    /// Frame k (already range-checked) as line integrals, finite.
    virtual std::vector<float> read(std::int64_t k) const = 0;
    virtual std::optional<std::vector<float>> ground_truth(std::int64_t k) const = 0;
    virtual const std::vector<std::int64_t>& timestamps() const = 0;
};

/// Every sensor group under /entry/sensors.
std::vector<std::unique_ptr<SensorSource>> open_recording_sensors(const hdf5::File& file);

/// The NXtomo scan under `entry` (a top-level group).
std::unique_ptr<SensorSource> open_nxtomo(const hdf5::File& file, const std::string& entry);

/// Throws naming the dataset, sensor and frame when a value is NaN or Inf.
inline void check_finite(const std::vector<float>& frame, const hdf5::Dataset& data,
                         const std::string& sensor, std::int64_t k)
{
    for (std::size_t i = 0; i < frame.size(); ++i) {
        if (!std::isfinite(frame[i])) {
            data.fail("frame " + std::to_string(k) + " of sensor '" + sensor +
                      "' has a non-finite value (" + std::to_string(frame[i]) + ") at index " +
                      std::to_string(i));
        }
    }
}

/// A dataset's shape must be `expected` (message names what it means).
inline void expect_shape(const hdf5::Dataset& d, const hdf5::Shape& expected, const char* meaning)
{
    const hdf5::Shape shape = d.shape();
    if (shape != expected) {
        d.fail("expected shape " + hdf5::to_string(expected) + " " + meaning + ", found " +
               hdf5::to_string(shape));
    }
}

inline void expect_numeric(const hdf5::Dataset& d)
{
    if (!hdf5::is_integer(d.dtype()) && !hdf5::is_floating(d.dtype())) {
        d.fail(std::string{"expected numbers, found dtype "} + hdf5::to_string(d.dtype()));
    }
}

}  // namespace recon::sensors
