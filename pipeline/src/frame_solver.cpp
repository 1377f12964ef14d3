#include "pipeline/frame_solver.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/events.hpp"
#include "kernels/host_memory.hpp"
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

namespace {

bool good(recon::SolveStatus status)
{
    return status == recon::SolveStatus::converged ||
           status == recon::SolveStatus::max_iterations;
}

template <class T>
kernels::View<const T> first(const kernels::View<T>& v, kernels::size_type count)
{
    return {v.data, count};
}

/// A solve of zeros from each start (it stops at once: the gradient is 0),
/// so that the sensor's frames do not wait for a launch to be built and its
/// kernels to be loaded: CUDA loads modules when a kernel first runs, and
/// for the persistent kernel's module that took 70–100 ms of the first
/// frame's solve on an H100 (8–10 ms with every module loaded at start).
void warm_up(recon::CgnrSolver& solver)
{
    const kernels::Executor& exec = solver.executor();
    if (exec.is_cpu()) return;
    kernels::fill(exec, solver.input(), 0.0f);
    solver.solve(recon::InitialImage::zero);
    solver.solve(recon::InitialImage::given);  // from the zeros just formed
    exec.synchronize();
}

}  // namespace

/// One of the slots of a FrameSolver with frames in flight: the frame in it and the
/// buffers and events it is staged and timed with. Buffers only grow, and
/// only while the slot is free (its last frame finished, so no queued work
/// still reads them).
struct FrameSolver::Flight {
    explicit Flight(const kernels::Executor& exec)
        : uploaded{exec}, done{exec}, timer{make_stage_timer(exec)}, scalars_host{1}
    {}

    void reserve(const kernels::Executor& exec, kernels::size_type m, kernels::size_type n)
    {
        if (b_host.size() < m) {
            b_host = kernels::PinnedArray<float>{m};
            b_device = kernels::Array<float>{exec, m};
        }
        if (image_host.size() < n) image_host = kernels::PinnedArray<float>{n};
    }

    kernels::PinnedArray<float> b_host;      // b staged for the upload
    kernels::Array<float> b_device;          // b on the device until the solve takes it
    kernels::PinnedArray<float> image_host;  // the image, downloaded
    kernels::Event uploaded;                 // on the copy stream: b_device is written
    kernels::Event done;                     // on the compute stream: image and results are here
    std::unique_ptr<StageTimer> timer;
    kernels::PinnedArray<kernels::CgnrScalars> scalars_host;  // the solve's outcome

    Reconstruction out;  // what is known of the frame before the solve
    Sensor* sensor = nullptr;
    kernels::size_type m = 0;
    bool warm = false;  // starts from the sensor's previous image
};

FrameSolver::FrameSolver(SystemModels& models, SolveSettings settings,
                         const kernels::Executor& exec, int frames_in_flight)
    : models_{models}, settings_{std::move(settings)}, exec_{exec}
{
    settings_.solver.validate();
    if (frames_in_flight < 0 || frames_in_flight > 2) {
        throw std::invalid_argument{"frames in flight: expected 0 (automatic), 1 or 2, found " +
                                    std::to_string(frames_in_flight)};
    }
    // A host-loop solve waits for the device: a second frame in flight would
    // only wait behind it, adding latency and no overlap.
    const bool overlaps =
        !exec_.is_cpu() && settings_.solver.launch != recon::SolveLaunch::host_loop;
    capacity_ = frames_in_flight > 0 ? frames_in_flight : (overlaps ? 2 : 1);
    // Streams, slots and events: on the CPU they run everything in order at
    // once, so submit() does all the work there.
    compute_ = std::make_unique<kernels::Stream>(exec_);
    copy_ = std::make_unique<kernels::Stream>(exec_);
    for (int k = 0; k < capacity_; ++k) {
        flights_.push_back(std::make_unique<Flight>(compute_->executor()));
    }
}

FrameSolver::~FrameSolver()
{
    // The slots' buffers must outlive the work queued on them.
    try {
        compute_->synchronize();
        copy_->synchronize();
    } catch (const std::exception&) {
        // A device error has already been reported by the frame it hit.
    }
}

FrameSolver::Sensor& FrameSolver::sensor(const std::string& name)
{
    if (const auto it = sensors_.find(name); it != sensors_.end()) return it->second;
    Sensor s;
    s.model = &models_.get(name);
    s.solver = std::make_unique<recon::CgnrSolver>(*s.model, settings_.regularizer,
                                                   settings_.solver, compute_->executor());
    return sensors_.emplace(name, std::move(s)).first->second;
}

bool FrameSolver::in_flight(const Flight& flight) const
{
    return std::find(order_.begin(), order_.end(), &flight) != order_.end();
}

void FrameSolver::prepare(const std::string& name)
{
    const Sensor& s = sensor(name);
    warm_up(*s.solver);
    for (auto& flight : flights_) {
        if (!in_flight(*flight)) flight->reserve(exec_, s.model->rows(), s.model->cols());
    }
}

FrameSolver::Sensor& FrameSolver::checked_sensor(const sensors::Frame& frame)
{
    Sensor& s = sensor(frame.sensor);
    const auto m = static_cast<std::size_t>(s.model->rows());
    if (frame.data.size() != m) {
        throw std::invalid_argument{"sensor '" + frame.sensor + "' frame " +
                                    std::to_string(frame.frame_id) + ": expected " +
                                    std::to_string(m) + " measurements (system model " +
                                    s.model->kind() + "), found " +
                                    std::to_string(frame.data.size())};
    }
    return s;
}

Reconstruction FrameSolver::describe(const QueuedFrame& item, const Sensor& s,
                                     Clock::time_point dequeued) const
{
    const sensors::Frame& frame = item.frame;
    Reconstruction out;
    out.sensor = frame.sensor;
    out.frame_id = frame.frame_id;
    out.timestamp_ns = frame.timestamp_ns;
    out.t_arrival_ns = item.t_arrival_ns;
    out.shape = s.model->image_shape();
    out.budget_ms = settings_.budget_ms;
    out.times[Stage::queue] = elapsed_ms(item.arrival, dequeued);
    return out;
}

void FrameSolver::submit(const QueuedFrame& item, Clock::time_point dequeued)
{
    if (in_flight() >= capacity_) {
        throw std::logic_error{"FrameSolver::submit: " + std::to_string(capacity_) +
                               " frames in flight already (finish one first)"};
    }
    submit_to_slot(item, dequeued);
}

Reconstruction FrameSolver::finish()
{
    if (in_flight() == 0) throw std::logic_error{"FrameSolver::finish: no frame in flight"};
    return finish_slot();
}

bool FrameSolver::oldest_ready() const
{
    if (order_.empty()) return true;
    try {
        return order_.front()->done.ready();
    } catch (const std::exception&) {
        return true;  // a device error: finish() reports it with the frame
    }
}

Reconstruction FrameSolver::solve(const QueuedFrame& item, Clock::time_point dequeued)
{
    if (in_flight() != 0) {
        throw std::logic_error{"FrameSolver::solve: frames are in flight (finish them first)"};
    }
    submit(item, dequeued);
    return finish();
}

// --- frames in flight in slots ------------------------------------------------

void FrameSolver::submit_to_slot(const QueuedFrame& item, Clock::time_point dequeued)
{
    const sensors::Frame& frame = item.frame;
    Sensor& s = checked_sensor(frame);
    Flight* free_slot = nullptr;
    for (auto& flight : flights_) {
        if (!in_flight(*flight)) free_slot = flight.get();
    }
    Flight& f = *free_slot;  // exists: fewer frames in flight than slots
    f.m = static_cast<kernels::size_type>(frame.data.size());
    f.reserve(exec_, f.m, s.model->cols());
    f.out = describe(item, s, dequeued);
    f.sensor = &s;
    f.warm = settings_.warm_start && s.has_previous;

    const kernels::Executor& copy = copy_->executor();
    try {
        // upload: staged into pinned memory (the start mark is queued first,
        // so when the copy stream is idle the stage includes the staging),
        // then copied on the copy stream while the compute stream solves.
        f.timer->start(Stage::upload, copy);
        std::copy(frame.data.begin(), frame.data.end(), f.b_host.data());
        kernels::copy(copy, f.b_device.view(), kernels::Executor::cpu(),
                      first(f.b_host.view(), f.m));
        f.timer->stop(Stage::upload, copy);
        f.uploaded.record(copy);
        queue_solve(f);
    } catch (...) {
        // Part of the frame may be queued; the sensor's image is unknown now.
        s.has_previous = false;
        throw;
    }
    // Optimistic: this frame's image seeds the sensor's next frame unless
    // finish() learns that its solve failed (see forget_image_of).
    s.has_previous = true;
    order_.push_back(&f);
}

void FrameSolver::queue_solve(Flight& f)
{
    const kernels::Executor& compute = compute_->executor();
    recon::CgnrSolver& solver = *f.sensor->solver;
    // The solver's input is written only here, in compute-stream order after
    // the previous solve: it never changes under a running solve.
    kernels::stream_wait(compute, f.uploaded);
    f.timer->start(Stage::solve, compute);
    kernels::copy(compute, solver.input(), compute, first(f.b_device.view(), f.m));
    // x0: the sensor's previous image is in solver.image() once the stream
    // gets here, because every frame of the sensor runs on this stream.
    solver.solve(f.warm ? recon::InitialImage::given : recon::InitialImage::zero);
    f.timer->stop(Stage::solve, compute);

    f.timer->start(Stage::download, compute);
    const kernels::View<float> image = solver.image();
    kernels::copy(kernels::Executor::cpu(), kernels::View<float>{f.image_host.data(), image.size},
                  compute, kernels::View<const float>{image.data, image.size});
    solver.queue_results_copy(f.scalars_host.view());
    f.timer->stop(Stage::download, compute);
    f.done.record(compute);
}

Reconstruction FrameSolver::finish_slot()
{
    Flight& f = *order_.front();
    order_.pop_front();  // the slot is free again, whatever happens below

    Reconstruction out = std::move(f.out);
    try {
        f.done.synchronize();
        out.result = recon::CgnrSolver::frame_result(f.scalars_host[0]);
        const float* image = f.image_host.data();
        out.image.assign(image, image + out.shape.size());
        for (const Stage stage : {Stage::upload, Stage::solve, Stage::download}) {
            out.times[stage] = f.timer->elapsed_ms(stage);
        }
    } catch (...) {
        forget_image_of(f);
        throw;
    }
    // A failed solve (breakdown, non-finite data) must not seed the next frame.
    if (!good(out.result.status)) forget_image_of(f);
    return out;
}

void FrameSolver::forget_image_of(const Flight& failed)
{
    Flight* next = order_.empty() ? nullptr : order_.front();
    if (next == nullptr || next->sensor != failed.sensor) {
        failed.sensor->has_previous = false;
        return;
    }
    // The sensor's next frame is already queued, warm-started from the
    // failed image: solve it again from zeros (its b is still staged in its
    // slot). The wasted solve costs time in that frame's total only; its
    // stage times are the second attempt's.
    if (next->warm) {
        next->warm = false;
        queue_solve(*next);
    }
}

}  // namespace recon::pipeline
