#pragma once
// A worker: takes frames from the queue, solves them, measures quality
// against ground truth when the frame carries it, and hands the result to
// the sinks. Run one per thread; each owns its FrameSolver.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/frame_queue.hpp"
#include "pipeline/frame_solver.hpp"
#include "pipeline/reconstruction.hpp"
#include "pipeline/sink.hpp"

namespace recon::pipeline {

using FrameQueue = BoundedQueue<QueuedFrame>;

/// Errors of frames that could not be solved, collected across workers.
class FrameErrors {
public:
    void add(const std::string& message);
    std::int64_t count() const;
    /// The first few messages (at most `limit`).
    std::vector<std::string> first(std::size_t limit = 5) const;

private:
    mutable std::mutex mutex_;
    std::int64_t count_ = 0;
    std::vector<std::string> messages_;
};

class Worker {
public:
    /// `on_done` (optional) is called after each frame taken from the
    /// queue has been delivered or has failed.
    Worker(FrameQueue& queue, FrameSolver& solver, SinkSet& sinks, FrameErrors& errors,
           std::function<void()> on_done = {});

    /// Processes frames until the queue is closed and drained. A frame that
    /// fails costs that frame only: its error goes to FrameErrors.
    void run();
    /// Solves one frame and delivers it to the sinks (run() calls this).
    void process(const QueuedFrame& item, Clock::time_point dequeued);

private:
    FrameQueue& queue_;
    FrameSolver& solver_;
    SinkSet& sinks_;
    FrameErrors& errors_;
    std::function<void()> on_done_;
};

}  // namespace recon::pipeline
