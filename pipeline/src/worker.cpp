#include "pipeline/worker.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <utility>

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
    std::deque<Pending> pending;  // submitted, oldest first
    for (;;) {
        std::optional<QueuedFrame> item;
        if (pending.empty()) {
            item = queue_.pop();
            if (!item) break;  // closed and drained
        } else if (static_cast<int>(pending.size()) < solver_.capacity()) {
            item = next_while_solving();
        }
        if (item) {
            start(std::move(*item), pending);
        } else {
            deliver_oldest(pending);
        }
    }
}

std::optional<QueuedFrame> Worker::next_while_solving()
{
    // The queue and the device cannot be waited on together: poll both. The
    // interval bounds how late a solved frame is noticed.
    constexpr auto poll = std::chrono::microseconds{100};
    for (;;) {
        if (solver_.oldest_ready()) return queue_.pop_for(std::chrono::seconds{0});
        if (auto item = queue_.pop_for(poll)) return item;
        // Closed and drained: no frame will come, finish the ones in flight.
        if (queue_.closed()) return std::nullopt;
    }
}

void Worker::start(QueuedFrame item, std::deque<Pending>& pending)
{
    const auto dequeued = Clock::now();
    try {
        solver_.submit(item, dequeued);
    } catch (const std::exception& e) {
        errors_.add(e.what());
        if (on_done_) on_done_();
        return;
    }
    pending.push_back(Pending{std::move(item), dequeued});
}

void Worker::deliver_oldest(std::deque<Pending>& pending)
{
    const Pending oldest = std::move(pending.front());
    pending.pop_front();
    try {
        deliver(oldest.item, solver_.finish());
    } catch (const std::exception& e) {
        errors_.add(e.what());
    }
    if (on_done_) on_done_();
}

void Worker::process(const QueuedFrame& item, Clock::time_point dequeued)
{
    deliver(item, solver_.solve(item, dequeued));
}

void Worker::deliver(const QueuedFrame& item, Reconstruction r)
{
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
