#pragma once
// What flows through the pipeline: a frame waiting in the queue, and the
// reconstruction of one frame on its way to the sinks.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/stage_timer.hpp"
#include "recon/cgnr.hpp"
#include "recon/system_model.hpp"
#include "sensors/frame.hpp"

namespace recon::pipeline {

/// A frame as the source hands it to the queue.
struct QueuedFrame {
    sensors::Frame frame;
    Clock::time_point arrival{};        // host clock when it entered the pipeline
    std::int64_t t_arrival_ns = 0;      // the same instant, wall clock (reports)
    std::optional<std::vector<float>> ground_truth;  // [ny][nx], when the source has it
};

/// Image quality against ground truth (see quality.hpp).
struct Quality {
    double psnr_db = 0.0;
    std::optional<double> ssim;  // images of at least 7 x 7 only
};

/// One solved frame: the image and everything the reports need.
struct Reconstruction {
    std::string sensor;
    std::int64_t frame_id = 0;
    std::int64_t timestamp_ns = 0;  // acquisition time from the source
    std::int64_t t_arrival_ns = 0;  // wall clock when it entered the pipeline
    recon::ImageShape shape;
    std::vector<float> image;       // [ny][nx]
    recon::FrameResult result;
    StageTimes times;
    double budget_ms = 0.0;
    bool deadline_missed = false;   // times.total_ms > budget_ms
    std::optional<Quality> quality;
};

}  // namespace recon::pipeline
