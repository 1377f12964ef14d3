#include "pipeline/sink.hpp"

#include <exception>

namespace recon::pipeline {

void SinkSet::add(std::shared_ptr<FrameSink> sink)
{
    std::lock_guard lock{mutex_};
    sinks_.push_back(std::move(sink));
}

void SinkSet::write_image(const Reconstruction& frame)
{
    std::lock_guard lock{mutex_};
    for (const auto& sink : sinks_) sink->write_image(frame);
}

void SinkSet::write_record(const Reconstruction& frame)
{
    std::lock_guard lock{mutex_};
    for (const auto& sink : sinks_) sink->write_record(frame);
}

void SinkSet::close()
{
    std::lock_guard lock{mutex_};
    if (closed_) return;
    closed_ = true;
    // Every sink gets closed (its files flushed) even when one fails; the
    // first failure is reported.
    std::exception_ptr first;
    for (const auto& sink : sinks_) {
        try {
            sink->close();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

}  // namespace recon::pipeline
