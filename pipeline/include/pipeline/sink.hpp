#pragma once
// Sinks: where reconstructions go. A frame reaches every sink twice: first
// its image (the timed "write" stage: files, network), then, once all of its
// stage times are known, its record (timing rows, reports, metrics).

#include <memory>
#include <mutex>
#include <vector>

#include "pipeline/reconstruction.hpp"

namespace recon::pipeline {

class FrameSink {
public:
    virtual ~FrameSink() = default;
    /// Delivers the image (counted in the frame's write stage).
    virtual void write_image(const Reconstruction& /*frame*/) {}
    /// Records the frame once its stage times and quality are final.
    virtual void write_record(const Reconstruction& /*frame*/) {}
    /// Flushes and closes; no calls follow.
    virtual void close() {}
};

/// Fans frames out to several sinks; thread-safe (one lock: sinks may
/// assume they are never called concurrently).
class SinkSet {
public:
    void add(std::shared_ptr<FrameSink> sink);
    void write_image(const Reconstruction& frame);
    void write_record(const Reconstruction& frame);
    /// Closes every sink once (later calls do nothing).
    void close();

private:
    std::mutex mutex_;
    std::vector<std::shared_ptr<FrameSink>> sinks_;
    bool closed_ = false;
};

}  // namespace recon::pipeline
