#include "pipeline/stage_timer.hpp"

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

void HostStageTimer::start(Stage stage)
{
    exec_.synchronize();  // earlier stages' device work is not this stage's
    start_[static_cast<int>(stage)] = Clock::now();
}

void HostStageTimer::stop(Stage stage)
{
    exec_.synchronize();
    stop_[static_cast<int>(stage)] = Clock::now();
}

double HostStageTimer::elapsed_ms(Stage stage)
{
    const int s = static_cast<int>(stage);
    return pipeline::elapsed_ms(start_[s], stop_[s]);
}

std::unique_ptr<StageTimer> make_stage_timer(const kernels::Executor& exec)
{
    return std::make_unique<HostStageTimer>(exec);
}

}  // namespace recon::pipeline
