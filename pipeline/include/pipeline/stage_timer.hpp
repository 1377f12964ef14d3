#pragma once
// Stage times of one frame (DESIGN §6: queue, upload, solve, download,
// write) and the timers that measure the device-side stages: std::chrono on
// the CPU, CUDA events on the streams the stages run on for a CUDA executor.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/events.hpp"
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
/// frame. start/stop mark points in the order of the work queued on a
/// stream of the timer's executor: by default its own stream, or `on` (the
/// same device; e.g. the upload on a copy stream, the solve on a compute
/// stream). elapsed_ms() may wait for the device. One timer per frame in
/// flight.
class StageTimer {
public:
    virtual ~StageTimer() = default;
    virtual void start(Stage stage, const kernels::Executor& on) = 0;
    virtual void stop(Stage stage, const kernels::Executor& on) = 0;
    /// Milliseconds between start(stage) and stop(stage) of the current frame.
    virtual double elapsed_ms(Stage stage) = 0;
    virtual const kernels::Executor& executor() const = 0;

    void start(Stage stage) { start(stage, executor()); }
    void stop(Stage stage) { stop(stage, executor()); }
};

/// std::chrono timer: start/stop first wait for the work queued on `on`, so
/// it also measures a CUDA executor correctly (if less precisely than events,
/// and at the price of a host synchronization at every mark).
class HostStageTimer final : public StageTimer {
public:
    explicit HostStageTimer(const kernels::Executor& exec) : exec_{exec} {}
    using StageTimer::start;
    using StageTimer::stop;
    void start(Stage stage, const kernels::Executor& on) override;
    void stop(Stage stage, const kernels::Executor& on) override;
    double elapsed_ms(Stage stage) override;
    const kernels::Executor& executor() const override { return exec_; }

private:
    kernels::Executor exec_;
    std::array<Clock::time_point, stage_count> start_{};
    std::array<Clock::time_point, stage_count> stop_{};
};

/// CUDA-event timer: start/stop record an event on the stream of `on` and
/// never synchronize; elapsed_ms() waits for the stage's stop event and
/// returns the device time between the two events. Marks of one stage may
/// lie on different streams of the device. On a CPU executor the events are
/// host time points (kernels/events.hpp).
class EventStageTimer final : public StageTimer {
public:
    /// Creates the events on exec's device.
    explicit EventStageTimer(const kernels::Executor& exec);
    using StageTimer::start;
    using StageTimer::stop;
    void start(Stage stage, const kernels::Executor& on) override;
    void stop(Stage stage, const kernels::Executor& on) override;
    /// Throws std::logic_error when the stage was not both started and stopped.
    double elapsed_ms(Stage stage) override;
    const kernels::Executor& executor() const override { return exec_; }

private:
    kernels::Executor exec_;
    std::vector<kernels::Event> start_, stop_;  // indexed by Stage
};

/// The best timer for an executor: EventStageTimer for CUDA executors,
/// HostStageTimer on the CPU.
std::unique_ptr<StageTimer> make_stage_timer(const kernels::Executor& exec);

}  // namespace recon::pipeline
