#pragma once
// Latency reporting (DESIGN §8): one JSON Lines record per frame, and a
// summary (count, dropped, missed, p50/p90/p99/max per stage, quality) as a
// table and as JSON.

#include <cstdint>
#include <fstream>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/sink.hpp"

namespace recon::pipeline {

/// The per-frame facts the reports keep.
struct FrameLatency {
    std::string sensor;
    std::int64_t frame_id = 0;
    std::int64_t t_arrival_ns = 0;
    StageTimes times;
    int iterations = 0;
    double rel_gradient = 0.0;
    recon::SolveStatus status = recon::SolveStatus::running;
    bool missed = false;
    std::optional<Quality> quality;
};

/// The JSON Lines record of one frame (stage times in ms).
nlohmann::json to_json(const FrameLatency& frame, double budget_ms);

/// The q-th percentile (0..100) with linear interpolation between order
/// statistics (numpy's default). Throws std::invalid_argument when empty.
double percentile(std::vector<double> values, double q);

/// Distribution of one quantity over frames.
struct Distribution {
    double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
Distribution distribution(const std::vector<double>& values);

struct LatencySummary {
    std::string device;
    double budget_ms = 0.0;
    std::int64_t count = 0;    // frames reconstructed
    std::int64_t dropped = 0;  // frames dropped before a worker took them
    std::int64_t failed = 0;   // frames that could not be solved
    std::int64_t missed = 0;   // frames over budget
    double wall_s = 0.0;       // first arrival to last frame written
    double frames_per_s = 0.0; // count / wall_s
    std::map<std::string, Distribution> stages;  // queue ... write, total
    Distribution iterations;
    std::optional<Distribution> psnr_db, ssim;   // when ground truth was known
};

/// Prints the summary as a table (one row per stage).
void print_summary(const LatencySummary& summary, std::ostream& out);
nlohmann::json to_json(const LatencySummary& summary);

/// A sink that keeps every frame's latency and appends its JSON Lines record
/// to a report file as it arrives (flushed per line).
class LatencyRecorder final : public FrameSink {
public:
    /// `report_path` empty: no JSONL file. Throws std::runtime_error naming
    /// the file when it cannot be created.
    LatencyRecorder(const std::string& report_path, double budget_ms, std::string device);

    void write_record(const Reconstruction& frame) override;
    void close() override;

    /// Adds frames dropped or failed before reaching a worker's sinks.
    void add_dropped(std::int64_t count) { dropped_ += count; }
    void add_failed(std::int64_t count) { failed_ += count; }

    const std::vector<FrameLatency>& frames() const { return frames_; }
    double budget_ms() const { return budget_ms_; }
    LatencySummary summary() const;

private:
    std::string report_path_;
    std::ofstream report_;
    double budget_ms_;
    std::string device_;
    std::vector<FrameLatency> frames_;
    std::int64_t dropped_ = 0;
    std::int64_t failed_ = 0;
};

/// Writes `summary` as JSON to `path`; throws std::runtime_error naming it.
void write_summary_json(const LatencySummary& summary, const std::string& path);

}  // namespace recon::pipeline
