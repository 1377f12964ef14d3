#pragma once
// Turns frames into images: the system model of each sensor (shared by all
// workers), one CgnrSolver per sensor and worker, warm start from the
// previous image of the same sensor, and the device-side stage times.

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "pipeline/reconstruction.hpp"
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
class FrameSolver {
public:
    FrameSolver(SystemModels& models, SolveSettings settings, const kernels::Executor& exec);

    /// Builds the sensor's model and solver now (else on its first frame).
    void prepare(const std::string& sensor) { slot(sensor); }

    /// Uploads b (and the initial image), solves, downloads the image. Fills
    /// the queue (from `dequeued`), upload, solve and download times; the
    /// write stage and the total are the caller's. Throws
    /// std::invalid_argument when the frame's length is not the model's m.
    Reconstruction solve(const QueuedFrame& item, Clock::time_point dequeued);

    const kernels::Executor& executor() const { return exec_; }
    const SolveSettings& settings() const { return settings_; }

private:
    struct Slot {
        const recon::SystemModel* model = nullptr;
        std::unique_ptr<recon::CgnrSolver> solver;
        bool has_previous = false;  // image() holds the last good image of this sensor
    };
    Slot& slot(const std::string& sensor);

    SystemModels& models_;
    SolveSettings settings_;
    kernels::Executor exec_;
    std::unique_ptr<StageTimer> timer_;
    std::map<std::string, Slot> slots_;
};

}  // namespace recon::pipeline
