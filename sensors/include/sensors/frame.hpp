#pragma once
// A frame: one complete measurement vector b of one sensor, ready to solve.

#include <cstdint>
#include <string>
#include <vector>

namespace recon::sensors {

struct Frame {
    std::string sensor;            // sensor name (recording group / stream channel)
    std::int64_t frame_id = 0;     // index within the sensor's series
    std::int64_t timestamp_ns = 0; // acquisition time (recording) or arrival time (stream)
    std::vector<float> data;       // b, length m: line integrals (after preprocessing)
};

}  // namespace recon::sensors
