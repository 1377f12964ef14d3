#pragma once
// Streams and events: owned CUDA streams to queue work on, and markers in a
// stream's order that the host or another stream can wait for and that time
// the work between them. Opaque like Executor: no CUDA header here. On the
// CPU, where every kernel has finished when its call returns, an event is
// the host time point at which it was recorded and waiting is a no-op.

#include <chrono>

#include "kernels/executor.hpp"

struct CUevent_st;

namespace recon::kernels {

/// Move-only owner of a CUDA stream on one device, created non-blocking
/// (it does not synchronize with the legacy default stream). For a CPU
/// executor it owns nothing and executor() is the CPU executor.
class Stream {
public:
    /// A new stream on exec's device. Throws std::runtime_error on a CUDA
    /// error, or for a CUDA executor in a build without the CUDA backend.
    explicit Stream(const Executor& exec);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;

    /// exec's backend and device, launching on this stream. Valid while the
    /// Stream lives; copies of it must not outlive it.
    const Executor& executor() const { return exec_; }
    /// Blocks until all work queued on the stream has finished.
    void synchronize() const { exec_.synchronize(); }

private:
    void release() noexcept;
    Executor exec_;
};

/// Move-only owner of a CUDA event (created with timing enabled) on one
/// device, or of a host time point on the CPU.
class Event {
public:
    /// An event for exec's backend and device (the stream is not used).
    /// Throws like Stream.
    explicit Event(const Executor& exec);
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    Event(Event&& other) noexcept;
    Event& operator=(Event&& other) noexcept;

    /// Marks the current end of exec.stream()'s queue: the event completes
    /// when the stream reaches it (CPU: takes the host time now). exec must
    /// have this event's backend and device. Does not synchronize. Recording
    /// again moves the marker.
    void record(const Executor& exec);
    /// Blocks the calling thread until the event has completed.
    void synchronize() const;
    /// True when the event has completed, or was never recorded.
    bool ready() const;
    bool recorded() const { return recorded_; }

    /// The raw event (nullptr on the CPU); for the backends.
    CUevent_st* get() const { return event_; }
    /// The time of record() on the CPU; for the backends.
    std::chrono::steady_clock::time_point host_time() const { return host_time_; }
    const Executor& executor() const { return exec_; }

private:
    void release() noexcept;
    Executor exec_;
    CUevent_st* event_ = nullptr;
    std::chrono::steady_clock::time_point host_time_{};
    bool recorded_ = false;
};

/// Makes work queued on exec.stream() after this call wait until `event`
/// has completed, without blocking the host (a no-op on the CPU). The event
/// may belong to another stream of the same device. Throws
/// std::logic_error when the event was never recorded.
void stream_wait(const Executor& exec, const Event& event);

/// Milliseconds from `start` to `stop` (device clock for CUDA, resolution
/// about half a microsecond; host clock on the CPU). Both must be recorded,
/// on streams of one device; waits until `stop` has completed. Throws
/// std::logic_error when either was never recorded or their backends or
/// devices differ.
double elapsed_ms(const Event& start, const Event& stop);

}  // namespace recon::kernels
