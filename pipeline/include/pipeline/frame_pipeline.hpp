#pragma once
// The frame pipeline shared by replay and the daemon: a bounded queue, a
// pool of workers (each with its own solvers, sharing the system models),
// and the sinks. Sources call submit(); finish() drains and stops.

#include <condition_variable>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/frame_queue.hpp"
#include "pipeline/frame_solver.hpp"
#include "pipeline/sink.hpp"
#include "pipeline/worker.hpp"

namespace recon::pipeline {

struct PipelineSetup {
    std::map<std::string, recon::SystemSpec> sensors;  // every sensor frames may name
    SolveSettings solve;
    kernels::Executor exec = kernels::Executor::cpu();
    int workers = 1;
    int queue_capacity = 16;
    DropPolicy drop_policy = DropPolicy::block;
};

class FramePipeline {
public:
    /// Builds every sensor's system model and each worker's solvers (so that
    /// bad geometry fails here, and the first frame pays no setup), then
    /// starts the workers. Throws std::invalid_argument naming the sensor.
    FramePipeline(PipelineSetup setup, SinkSet& sinks);
    /// Calls finish().
    ~FramePipeline();
    FramePipeline(const FramePipeline&) = delete;
    FramePipeline& operator=(const FramePipeline&) = delete;

    /// Waits until a worker has a free frame slot (fewer frames queued or
    /// being solved than the workers hold: one per CPU worker, two per GPU
    /// worker): a source that produces as fast as the pipeline
    /// consumes calls it before each frame, so that its frames do not wait
    /// in the queue and their latency is the pipeline's own.
    void wait_for_room();
    /// Stamps the frame's arrival now and queues it under the drop policy.
    PushResult submit(sensors::Frame frame,
                      std::optional<std::vector<float>> ground_truth = std::nullopt);
    /// Closes the queue, lets the workers drain it, joins them. Idempotent.
    void finish();

    std::int64_t dropped() const { return queue_.dropped(); }
    const FrameErrors& errors() const { return errors_; }
    SystemModels& models() { return models_; }
    const kernels::Executor& executor() const { return setup_.exec; }

private:
    PipelineSetup setup_;
    SystemModels models_;
    FrameQueue queue_;
    FrameErrors errors_;
    std::vector<std::unique_ptr<FrameSolver>> solvers_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<std::thread> threads_;

    std::mutex flight_mutex_;
    std::condition_variable flight_done_;
    int in_flight_ = 0;    // frames queued or being solved
    int frame_slots_ = 0;  // frames the workers can hold at once (2 per GPU worker)
};

}  // namespace recon::pipeline
