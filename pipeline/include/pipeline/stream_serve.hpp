#pragma once
// What `recon simulate --serve` streams: a series source that is either a
// recording (float32 line integrals) or a live phantom (raw uint16 counts
// with their flat field, or float32 line integrals).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "stream/messages.hpp"

namespace recon::pipeline {

struct SeriesSource {
    std::vector<std::string> channels;
    std::int64_t frames = 0;  // images per series
    std::string dtype;        // of the image arrays
    std::map<std::string, stream::MultiDimArray> flatfield, darkfield;
    /// The arrays of image k (channel -> array); channels without frame k are absent.
    std::function<std::map<std::string, stream::MultiDimArray>(std::int64_t k)> image;
};

}  // namespace recon::pipeline
