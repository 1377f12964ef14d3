#pragma once
// A worker: takes frames from the queue, solves them, measures quality
// against ground truth when the frame carries it, and hands the result to
// the sinks. Run one per thread; each owns its FrameSolver.

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
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

    /// Processes frames until the queue is closed and drained. Keeps up to
    /// solver.capacity() frames in flight (two on a GPU: a frame that
    /// arrives while the previous one solves is submitted at once, so its
    /// upload overlaps that solve), delivering them in the order taken.
    /// A frame that fails costs that frame only: its error goes to
    /// FrameErrors.
    void run();
    /// Solves one frame and delivers it to the sinks; nothing else may be
    /// in flight. Throws what the solver or a sink throws.
    void process(const QueuedFrame& item, Clock::time_point dequeued);

private:
    /// A frame submitted to the solver and not yet delivered.
    struct Pending {
        QueuedFrame item;
        Clock::time_point dequeued;
    };
    /// The next frame, if it arrives before the oldest frame in flight has
    /// been solved (its upload then overlaps that solve); else nothing.
    std::optional<QueuedFrame> next_while_solving();
    void start(QueuedFrame item, std::deque<Pending>& pending);
    void deliver_oldest(std::deque<Pending>& pending);
    /// Write stage, total, deadline, quality, then the record.
    void deliver(const QueuedFrame& item, Reconstruction r);

    FrameQueue& queue_;
    FrameSolver& solver_;
    SinkSet& sinks_;
    FrameErrors& errors_;
    std::function<void()> on_done_;
};

}  // namespace recon::pipeline
