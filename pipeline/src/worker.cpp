#include "pipeline/worker.hpp"

#include <algorithm>
#include <exception>

#include "pipeline/quality.hpp"

namespace recon::pipeline {

void FrameErrors::add(const std::string& message)
{
    std::lock_guard lock{mutex_};
    ++count_;
    if (messages_.size() < 100) messages_.push_back(message);
}

std::int64_t FrameErrors::count() const
{
    std::lock_guard lock{mutex_};
    return count_;
}

std::vector<std::string> FrameErrors::first(std::size_t limit) const
{
    std::lock_guard lock{mutex_};
    const auto n = std::min(limit, messages_.size());
    return {messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(n)};
}

Worker::Worker(FrameQueue& queue, FrameSolver& solver, SinkSet& sinks, FrameErrors& errors,
               std::function<void()> on_done)
    : queue_{queue}, solver_{solver}, sinks_{sinks}, errors_{errors}, on_done_{std::move(on_done)}
{}

void Worker::run()
{
    while (auto item = queue_.pop()) {
        const auto dequeued = Clock::now();
        try {
            process(*item, dequeued);
        } catch (const std::exception& e) {
            errors_.add(e.what());
        }
        if (on_done_) on_done_();
    }
}

void Worker::process(const QueuedFrame& item, Clock::time_point dequeued)
{
    Reconstruction r = solver_.solve(item, dequeued);

    const auto write_start = Clock::now();
    sinks_.write_image(r);
    const auto written = Clock::now();
    r.times[Stage::write] = elapsed_ms(write_start, written);
    r.times.total_ms = elapsed_ms(item.arrival, written);
    r.deadline_missed = r.times.total_ms > r.budget_ms;

    // Quality is measured after the deadline clock stops: it is a report,
    // not part of the pipeline's latency.
    if (item.ground_truth) r.quality = measure_quality(r.image, *item.ground_truth, r.shape);
    sinks_.write_record(r);
}

}  // namespace recon::pipeline
