#pragma once
// Stage times of one frame (DESIGN §6: queue, upload, solve, download,
// write) and the timer that measures the device-side stages. The CPU path
// times them with std::chrono; a CUDA build can return a timer based on
// CUDA events from make_stage_timer() without touching the pipeline.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include "kernels/executor.hpp"

namespace recon::pipeline {

enum class Stage : int { queue, upload, solve, download, write };
inline constexpr int stage_count = 5;
inline constexpr std::array<Stage, stage_count> all_stages{Stage::queue, Stage::upload,
                                                           Stage::solve, Stage::download,
                                                           Stage::write};

/// "queue", "upload", "solve", "download", "write".
const char* to_string(Stage stage);

/// Milliseconds per stage of one frame, and the total from arrival to written.
struct StageTimes {
    std::array<double, stage_count> ms{};  // indexed by Stage
    double total_ms = 0.0;

    double& operator[](Stage s) { return ms[static_cast<int>(s)]; }
    double operator[](Stage s) const { return ms[static_cast<int>(s)]; }
};

/// The host clock the pipeline stamps arrivals with.
using Clock = std::chrono::steady_clock;

/// Milliseconds between two host time points.
inline double elapsed_ms(Clock::time_point from, Clock::time_point to)
{
    return std::chrono::duration<double, std::milli>(to - from).count();
}

/// Wall-clock nanoseconds since the epoch (t_arrival_ns in reports).
std::int64_t wall_clock_ns();

/// Measures the stages a backend executes (upload, solve, download) of one
/// frame at a time. start/stop are queued in stream order on a device;
/// elapsed_ms() may wait for the device.
class StageTimer {
public:
    virtual ~StageTimer() = default;
    virtual void start(Stage stage) = 0;
    virtual void stop(Stage stage) = 0;
    /// Milliseconds between start(stage) and stop(stage) of the current frame.
    virtual double elapsed_ms(Stage stage) = 0;
};

/// std::chrono timer: stop() first waits for the executor's queued work, so
/// it also measures a CUDA executor correctly (if less precisely than events).
class HostStageTimer final : public StageTimer {
public:
    explicit HostStageTimer(const kernels::Executor& exec) : exec_{exec} {}
    void start(Stage stage) override;
    void stop(Stage stage) override;
    double elapsed_ms(Stage stage) override;

private:
    kernels::Executor exec_;
    std::array<Clock::time_point, stage_count> start_{};
    std::array<Clock::time_point, stage_count> stop_{};
};

/// The best timer for an executor (today: HostStageTimer for every backend).
std::unique_ptr<StageTimer> make_stage_timer(const kernels::Executor& exec);

}  // namespace recon::pipeline
