#include "pipeline/stage_timer.hpp"

#include <stdexcept>
#include <string>

namespace recon::pipeline {

const char* to_string(Stage stage)
{
    switch (stage) {
    case Stage::queue: return "queue";
    case Stage::upload: return "upload";
    case Stage::solve: return "solve";
    case Stage::download: return "download";
    case Stage::write: return "write";
    }
    return "?";
}

std::int64_t wall_clock_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void HostStageTimer::start(Stage stage, const kernels::Executor& on)
{
    on.synchronize();  // earlier stages' device work is not this stage's
    start_[static_cast<int>(stage)] = Clock::now();
}

void HostStageTimer::stop(Stage stage, const kernels::Executor& on)
{
    on.synchronize();
    stop_[static_cast<int>(stage)] = Clock::now();
}

double HostStageTimer::elapsed_ms(Stage stage)
{
    const int s = static_cast<int>(stage);
    return pipeline::elapsed_ms(start_[s], stop_[s]);
}

EventStageTimer::EventStageTimer(const kernels::Executor& exec) : exec_{exec}
{
    start_.reserve(stage_count);
    stop_.reserve(stage_count);
    for (int s = 0; s < stage_count; ++s) {
        start_.emplace_back(exec_);
        stop_.emplace_back(exec_);
    }
}

void EventStageTimer::start(Stage stage, const kernels::Executor& on)
{
    start_[static_cast<std::size_t>(stage)].record(on);
}

void EventStageTimer::stop(Stage stage, const kernels::Executor& on)
{
    stop_[static_cast<std::size_t>(stage)].record(on);
}

double EventStageTimer::elapsed_ms(Stage stage)
{
    const auto s = static_cast<std::size_t>(stage);
    if (!start_[s].recorded() || !stop_[s].recorded()) {
        throw std::logic_error{std::string{"stage timer: stage '"} + to_string(stage) +
                               "' was not both started and stopped"};
    }
    return kernels::elapsed_ms(start_[s], stop_[s]);
}

std::unique_ptr<StageTimer> make_stage_timer(const kernels::Executor& exec)
{
    if (exec.is_cpu()) return std::make_unique<HostStageTimer>(exec);
    return std::make_unique<EventStageTimer>(exec);
}

}  // namespace recon::pipeline
