#include "pipeline/frame_pipeline.hpp"

namespace recon::pipeline {

FramePipeline::FramePipeline(PipelineSetup setup, SinkSet& sinks)
    : setup_{std::move(setup)},
      models_{setup_.sensors},
      queue_{static_cast<std::size_t>(setup_.queue_capacity), setup_.drop_policy}
{
    for (int w = 0; w < setup_.workers; ++w) {
        auto solver = std::make_unique<FrameSolver>(models_, setup_.solve, setup_.exec);
        for (const auto& [name, spec] : setup_.sensors) solver->prepare(name);
        workers_.push_back(std::make_unique<Worker>(queue_, *solver, sinks, errors_, [this] {
            {
                std::lock_guard lock{flight_mutex_};
                --in_flight_;
            }
            flight_done_.notify_all();
        }));
        frame_slots_ += solver->capacity();
        solvers_.push_back(std::move(solver));
    }
    for (auto& worker : workers_) threads_.emplace_back([w = worker.get()] { w->run(); });
}

FramePipeline::~FramePipeline() { finish(); }

void FramePipeline::wait_for_room()
{
    std::unique_lock lock{flight_mutex_};
    flight_done_.wait(lock, [&] { return in_flight_ < frame_slots_; });
}

PushResult FramePipeline::submit(sensors::Frame frame,
                                 std::optional<std::vector<float>> ground_truth)
{
    QueuedFrame item;
    item.frame = std::move(frame);
    item.ground_truth = std::move(ground_truth);
    item.arrival = Clock::now();
    item.t_arrival_ns = wall_clock_ns();
    {
        std::lock_guard lock{flight_mutex_};
        ++in_flight_;  // before the push: a worker may finish it at once
    }
    const PushResult result = queue_.push(std::move(item));
    if (result != PushResult::accepted) {
        // Dropped or refused: this frame, or the oldest it displaced, will
        // never reach a worker.
        {
            std::lock_guard lock{flight_mutex_};
            --in_flight_;
        }
        flight_done_.notify_all();
    }
    return result;
}

void FramePipeline::finish()
{
    queue_.close();
    for (auto& thread : threads_) {
        if (thread.joinable()) thread.join();
    }
}

}  // namespace recon::pipeline
