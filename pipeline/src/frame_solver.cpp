#include "pipeline/frame_solver.hpp"

#include <stdexcept>

#include "kernels/memory.hpp"
#include "kernels/primitives.hpp"

namespace recon::pipeline {

SystemModels::SystemModels(std::map<std::string, recon::SystemSpec> specs)
    : specs_{std::move(specs)}
{}

const recon::SystemModel& SystemModels::get(const std::string& sensor)
{
    std::lock_guard lock{mutex_};
    if (const auto it = models_.find(sensor); it != models_.end()) return *it->second;
    const auto spec = specs_.find(sensor);
    if (spec == specs_.end()) {
        throw std::invalid_argument{"sensor '" + sensor + "': no system model configured for it"};
    }
    try {
        auto model = recon::make_system_model(spec->second);
        return *models_.emplace(sensor, std::move(model)).first->second;
    } catch (const std::exception& e) {
        throw std::invalid_argument{"sensor '" + sensor + "': " + e.what()};
    }
}

FrameSolver::FrameSolver(SystemModels& models, SolveSettings settings,
                         const kernels::Executor& exec)
    : models_{models},
      settings_{std::move(settings)},
      exec_{exec},
      timer_{make_stage_timer(exec)}
{
    settings_.solver.validate();
}

FrameSolver::Slot& FrameSolver::slot(const std::string& sensor)
{
    if (const auto it = slots_.find(sensor); it != slots_.end()) return it->second;
    Slot s;
    s.model = &models_.get(sensor);
    s.solver = std::make_unique<recon::CgnrSolver>(*s.model, settings_.regularizer,
                                                   settings_.solver, exec_);
    return slots_.emplace(sensor, std::move(s)).first->second;
}

Reconstruction FrameSolver::solve(const QueuedFrame& item, Clock::time_point dequeued)
{
    const sensors::Frame& frame = item.frame;
    Slot& s = slot(frame.sensor);
    recon::CgnrSolver& solver = *s.solver;
    const auto m = static_cast<std::size_t>(s.model->rows());
    if (frame.data.size() != m) {
        throw std::invalid_argument{"sensor '" + frame.sensor + "' frame " +
                                    std::to_string(frame.frame_id) + ": expected " +
                                    std::to_string(m) + " measurements (system model " +
                                    s.model->kind() + "), found " +
                                    std::to_string(frame.data.size())};
    }

    Reconstruction out;
    out.sensor = frame.sensor;
    out.frame_id = frame.frame_id;
    out.timestamp_ns = frame.timestamp_ns;
    out.t_arrival_ns = item.t_arrival_ns;
    out.shape = s.model->image_shape();
    out.budget_ms = settings_.budget_ms;
    out.times[Stage::queue] = elapsed_ms(item.arrival, dequeued);

    // upload: b, and x0 = zeros unless warm-starting from this sensor's
    // previous image, which is still in the solver's image buffer.
    timer_->start(Stage::upload);
    kernels::copy(exec_, solver.input(), kernels::Executor::cpu(),
                  kernels::View<const float>{frame.data.data(),
                                             static_cast<kernels::size_type>(m)});
    if (!(settings_.warm_start && s.has_previous)) kernels::fill(exec_, solver.image(), 0.0f);
    timer_->stop(Stage::upload);

    timer_->start(Stage::solve);
    solver.solve();
    timer_->stop(Stage::solve);
    out.result = solver.results().front();

    timer_->start(Stage::download);
    out.image.resize(static_cast<std::size_t>(out.shape.size()));
    kernels::copy(kernels::Executor::cpu(),
                  kernels::View<float>{out.image.data(), out.shape.size()}, exec_,
                  kernels::View<const float>{solver.image().data, solver.image().size});
    exec_.synchronize();
    timer_->stop(Stage::download);

    for (const Stage stage : {Stage::upload, Stage::solve, Stage::download}) {
        out.times[stage] = timer_->elapsed_ms(stage);
    }
    // A failed solve (breakdown, non-finite data) must not seed the next frame.
    const auto status = out.result.status;
    s.has_previous = status == recon::SolveStatus::converged ||
                     status == recon::SolveStatus::max_iterations;
    return out;
}

}  // namespace recon::pipeline
