#pragma once
// Turns frames into images: the system model of each sensor (shared by all
// workers), one CgnrSolver per sensor and worker, warm start from the
// previous image of the same sensor, the device-side stage times, and on a
// GPU two frames in flight (upload of one while the other solves).

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/reconstruction.hpp"
#include "kernels/events.hpp"
#include "pipeline/stage_timer.hpp"
#include "recon/cgnr.hpp"
#include "recon/regularizer.hpp"
#include "recon/system_model.hpp"

namespace recon::pipeline {

/// The system model of every sensor, built on first use from its spec and
/// shared by all workers (SystemModel::view is thread-safe). Thread-safe.
class SystemModels {
public:
    /// `specs`: sensor name -> the spec its frames are measured with.
    explicit SystemModels(std::map<std::string, recon::SystemSpec> specs);

    /// The model of `sensor`; throws std::invalid_argument for an unknown
    /// sensor, or with the spec's error prefixed by the sensor's name.
    const recon::SystemModel& get(const std::string& sensor);
    bool has(const std::string& sensor) const { return specs_.count(sensor) != 0U; }
    const std::map<std::string, recon::SystemSpec>& specs() const { return specs_; }

private:
    std::map<std::string, recon::SystemSpec> specs_;
    std::mutex mutex_;
    std::map<std::string, std::unique_ptr<recon::SystemModel>> models_;
};

/// How every frame is solved.
struct SolveSettings {
    recon::SolverOptions solver;
    recon::Regularizer regularizer;
    bool warm_start = true;
    double budget_ms = 440.0;
};

/// One worker's solvers. Not thread-safe: one FrameSolver per worker thread.
///
/// Each frame in flight takes one of the slots (pinned host staging for b
/// and for the image, device staging for b, events, a stage timer). On the
/// CPU the streams run everything at once, so submit() solves the frame. On
/// a CUDA executor up to two frames are in flight. A frame's b is staged in pinned memory and
/// uploaded on a copy stream while the frame before it solves on the
/// compute stream; the compute stream then waits for the upload, copies the
/// staging buffer into the solver's input (so a running solve never sees
/// its input change), solves and downloads the image into the slot. Frames
/// of one sensor share that sensor's solver, so stream order on the compute
/// stream hands each one the previous image for its warm start; when a
/// frame turns out bad (breakdown, non_finite) after the next frame of its
/// sensor was queued warm, that frame is queued again from zeros, so the
/// images equal the sequential pipeline's.
class FrameSolver {
public:
    /// `frames_in_flight`: 0 chooses (2 on a CUDA executor unless the solver
    /// launches a host loop, else 1); 1 or 2 force it, on any executor (2
    /// on the CPU queues two frames in order, for tests). Throws
    /// std::invalid_argument for another value or bad solver options.
    FrameSolver(SystemModels& models, SolveSettings settings, const kernels::Executor& exec,
                int frames_in_flight = 0);
    /// Waits for the frames still in flight (their results are lost).
    ~FrameSolver();
    FrameSolver(const FrameSolver&) = delete;
    FrameSolver& operator=(const FrameSolver&) = delete;

    /// Builds the sensor's model and solver now (else on its first frame),
    /// runs one solve of zeros on a GPU (its launch built and its kernels
    /// loaded before the first frame), and sizes the staging buffers for it.
    void prepare(const std::string& sensor);

    /// Frames that may be in flight at once (see the constructor).
    int capacity() const { return capacity_; }
    /// Frames submitted and not yet finished.
    int in_flight() const { return static_cast<int>(order_.size()); }

    /// Starts a frame (precondition: in_flight() < capacity()): on CUDA it
    /// queues upload, solve and download and returns without waiting; on the
    /// CPU it does all the work now. Throws std::invalid_argument when the
    /// frame's sensor is unknown or its length is not the model's m; nothing
    /// is queued then and the frame is not in flight.
    void submit(const QueuedFrame& item, Clock::time_point dequeued);

    /// Waits for the oldest frame in flight and returns its reconstruction
    /// with the queue (from `dequeued` of submit), upload, solve and
    /// download times; the write stage and the total are the caller's.
    /// Frames finish in submit order. When the frame failed (an error on the
    /// device), it throws and the frame is no longer in flight: a frame that
    /// fails costs that frame only.
    Reconstruction finish();

    /// True when finish() would return without waiting for the device (the
    /// oldest frame in flight has completed, or failed), or nothing is in
    /// flight. Never throws.
    bool oldest_ready() const;

    /// submit() then finish() for one frame; nothing else may be in flight.
    Reconstruction solve(const QueuedFrame& item, Clock::time_point dequeued);

    const kernels::Executor& executor() const { return exec_; }
    const SolveSettings& settings() const { return settings_; }

private:
    struct Sensor {
        const recon::SystemModel* model = nullptr;
        std::unique_ptr<recon::CgnrSolver> solver;
        /// The solver's image holds, or will hold once the compute stream
        /// gets there, a good image of this sensor to warm-start from. A
        /// frame still in flight counts as good until finish() learns it
        /// was not.
        bool has_previous = false;
    };
    struct Flight;  // one slot: a frame in flight and its buffers

    Sensor& sensor(const std::string& name);
    /// The sensor of `frame`, after checking the frame's length against it.
    Sensor& checked_sensor(const sensors::Frame& frame);
    Reconstruction describe(const QueuedFrame& item, const Sensor& s,
                            Clock::time_point dequeued) const;
    void submit_to_slot(const QueuedFrame& item, Clock::time_point dequeued);
    /// Queues on the compute stream: wait for the slot's upload, b into the
    /// solver, x0, solve, download of image and results, `done` event.
    void queue_solve(Flight& flight);
    Reconstruction finish_slot();
    /// After `failed` finished badly: the next frame of its sensor must not
    /// start from its image.
    void forget_image_of(const Flight& failed);
    /// Whether the slot holds a frame (it is in order_).
    bool in_flight(const Flight& flight) const;

    SystemModels& models_;
    SolveSettings settings_;
    kernels::Executor exec_;
    int capacity_ = 1;
    // Declared before the buffers so that they outlive them.
    std::unique_ptr<kernels::Stream> compute_, copy_;
    std::map<std::string, Sensor> sensors_;
    std::vector<std::unique_ptr<Flight>> flights_;  // the slots
    std::deque<Flight*> order_;                     // in slots, oldest first
};

}  // namespace recon::pipeline
