// The GPU tables of `recon bench` (see bench_cuda.hpp). Every time is the
// span between CUDA events on the executor's stream(s) around the work,
// median of the repetitions after one warm-up run. Inputs stay resident
// between repetitions, as they do in a running pipeline (the paper
// matrices, 8-16 MB, then sit in the 50-60 MB L2 of an H100/H200).

#include "pipeline/bench_cuda.hpp"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/baselines.hpp"
#include "kernels/memory.hpp"
#include "kernels/persistent.hpp"
#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"

namespace recon::pipeline {

namespace {

namespace kn = recon::kernels;
using kn::Executor;

template <class T>
kn::View<const T> cview(const kn::Array<T>& a)
{
    return {a.data(), a.size()};
}

/// Median-ready timing of `work` by CUDA events, one warm-up.
Timing timed(const Executor& exec, int repetitions, const std::function<void()>& work)
{
    return measure(1, repetitions, [&] { return kn::time_on_device_ms({exec}, work); });
}

kn::HostCsr host_csr(const recon::CsrMatrix& a)
{
    return {a.rows, a.cols, a.row_ptr.data(), a.col_idx.data(), a.values.data()};
}

std::string fmt(double v, int precision = 3)
{
    std::ostringstream s;
    s.precision(precision);
    s << v;
    return s.str();
}

std::vector<float> download(const Executor& exec, kn::View<float> v, kn::size_type count)
{
    std::vector<float> host(static_cast<std::size_t>(count));
    kn::copy(Executor::cpu(), kn::View<float>{host.data(), count}, exec,
             kn::View<const float>{v.data, count});
    exec.synchronize();
    return host;
}

/// Sets one of the kernels' environment switches (RECON_..., for comparing
/// their paths) for the lifetime of the object.
class ScopedSwitch {
public:
    ScopedSwitch(const char* variable, const char* value) : variable_{variable}
    {
        setenv(variable, value, 1);
    }
    ~ScopedSwitch() { unsetenv(variable_); }
    ScopedSwitch(const ScopedSwitch&) = delete;
    ScopedSwitch& operator=(const ScopedSwitch&) = delete;

private:
    const char* variable_;
};

struct SolveCase {
    std::string name;
    const recon::SystemModel* model;
    recon::Regularizer regularizer;
    recon::SolverOptions options;
};

struct SolveOutcome {
    Timing timing;
    std::vector<float> image;  // every frame's, one after the other
    std::vector<recon::FrameResult> results;  // every frame
};

/// One solver of `batch` frames; each timed run copies the frames' b into
/// the fixed input buffer (device to device, as a new frame does) and
/// solves from x0 = 0 (InitialImage::zero, as a frame without a warm start).
SolveOutcome run_solver(const SolveCase& c, const Executor& exec, int batch,
                        const std::vector<float>& b_one, int repetitions)
{
    recon::CgnrSolver solver{*c.model, c.regularizer, c.options, exec, batch};
    std::vector<float> b_all;
    for (int f = 0; f < batch; ++f) b_all.insert(b_all.end(), b_one.begin(), b_one.end());
    const kn::Array<float> staged{exec, b_all};
    SolveOutcome out;
    out.timing = timed(exec, repetitions, [&] {
        kn::copy(exec, solver.input(), exec, cview(staged));
        solver.solve(recon::InitialImage::zero);
    });
    out.image = download(exec, solver.image(), static_cast<kn::size_type>(batch) * c.model->cols());
    out.results = solver.results();
    return out;
}

/// The iterations the frames of a solve ran: "400 it", or "21–27 it" where
/// they differ (a frame that stopped early makes the time no longer that
/// of the iterations asked for, so the row says so).
std::string iterations_note(const std::vector<recon::FrameResult>& results)
{
    int fewest = results.front().iterations;
    int most = fewest;
    for (const recon::FrameResult& r : results) {
        fewest = std::min(fewest, r.iterations);
        most = std::max(most, r.iterations);
    }
    return (fewest == most ? std::to_string(most) : std::to_string(fewest) + "–" + std::to_string(most)) +
           " it";
}

/// The largest ‖A x − b‖ / ‖b‖ of a batch's frames (`images`: each frame's
/// x, one after the other; every frame solved for the same b).
double worst_residual(const recon::CsrMatrix& a, const std::vector<float>& images,
                      const std::vector<float>& b)
{
    const auto n = static_cast<std::ptrdiff_t>(a.cols);
    double worst = 0.0;
    for (auto frame = images.begin(); frame != images.end(); frame += n) {
        worst = std::max(worst, relative_residual(a, std::vector<float>(frame, frame + n), b));
    }
    return worst;
}

/// Throughput and per-frame latency of a batch's solve, its frames'
/// iterations and their largest ‖A x − b‖ / ‖b‖.
std::string batch_note(int batch, const Timing& t, const std::vector<recon::FrameResult>& results,
                       double worst_residual)
{
    return fmt(1000.0 * batch / t.median(), 4) + " frames/s, " + fmt(t.median() / batch) +
           " ms/frame, " + iterations_note(results) + ", |Ax-b|/|b| <= " + fmt(worst_residual);
}

std::string solve_note(const recon::CsrMatrix& a, const SolveOutcome& o, const std::vector<float>& b)
{
    return "|Ax-b|/|b| " + fmt(relative_residual(a, o.image, b)) + ", " +
           std::to_string(o.results.front().iterations) + " it";
}

/// The two cuSPARSE+cuBLAS CGLS rows (host loop, one graph) on `csr`.
void add_cusparse_cgls_rows(BenchTable& table, const std::string& section,
                            const std::string& problem, const recon::CsrMatrix& csr,
                            const std::vector<float>& b, const Executor& exec, int iterations,
                            int repetitions, const std::string& extra_note = "")
{
    const std::string device = kn::device_name(exec);
    kn::CusparseCgls cgls{exec, host_csr(csr)};
    const kn::Array<float> staged{exec, b};
    for (const bool graph : {false, true}) {
        const Timing timing = timed(exec, repetitions, [&] {
            kn::copy(exec, cgls.input(), exec, cview(staged));
            if (graph) {
                cgls.solve_graph(iterations);
            } else {
                cgls.solve_host_loop(iterations);
            }
        });
        const auto x = download(exec, cgls.image(), csr.cols);
        table.add({section, problem,
                   graph ? cuda_solve_baseline : "cuSPARSE+cuBLAS CGLS, host loop", device, timing,
                   "|Ax-b|/|b| " + fmt(relative_residual(csr, x, b)) + ", " +
                       std::to_string(iterations) + " it" + extra_note});
    }
}

/// The parallel-beam products of ct_256 on the fly, one kernel sequence per
/// row (A x: staged image lines, and pair images then rays; Aᵀ y: the
/// pixel-driven gather; the fused Aᵀ(A d) as the solver runs it), on random
/// inputs; 1 frame and 4 frames.
void add_ct_operator_rows(BenchTable& table, const recon::Parallel2d& fly, const Executor& exec,
                          const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int runs = std::max(50, config.repetitions);
    const auto m = static_cast<std::size_t>(fly.rows());
    const auto n = static_cast<std::size_t>(fly.cols());
    std::mt19937 rng{20261122};
    std::uniform_real_distribution<float> value{-1.0f, 1.0f};
    std::vector<float> host_x(4 * n), host_y(4 * m);
    for (float& v : host_x) v = value(rng);
    for (float& v : host_y) v = value(rng);
    const kn::Array<float> x{exec, host_x}, y{exec, host_y};
    kn::Array<float> ax{exec, static_cast<kn::size_type>(4 * m)};
    kn::Array<float> aty{exec, static_cast<kn::size_type>(4 * n)};
    const auto view = fly.view(exec);
    for (const int frames : {1, 4}) {
        const std::string suffix = frames == 1 ? "" : ", 4 frames";
        const kn::View<const float> xs{x.data(), static_cast<kn::size_type>(frames * n)};
        const kn::View<const float> ys{y.data(), static_cast<kn::size_type>(frames * m)};
        const kn::View<float> axs{ax.data(), static_cast<kn::size_type>(frames * m)};
        const kn::View<float> atys{aty.data(), static_cast<kn::size_type>(frames * n)};
        auto row = [&](const std::string& variant, const std::function<void()>& work) {
            table.add({"gpu operators", "ct_256", variant + suffix, device, timed(exec, runs, work),
                       ""});
        };
        // Both A x kernels (RECON_PARALLEL2D_RAYS); by default one frame
        // takes the pair images, 4 frames the staged lines.
        struct Rays {
            const char* mode;
            const char* kernel;
        };
        for (const Rays rays : {Rays{"lines", "staged image lines"},
                                Rays{"pairs", "pair images + rays"}}) {
            const ScopedSwitch on{"RECON_PARALLEL2D_RAYS", rays.mode};
            row(std::string{"A x, on the fly ("} + rays.kernel + ")",
                [&] { kn::apply(exec, view, frames, xs, axs); });
        }
        row("At y, on the fly (pixel-driven)",
            [&] { kn::apply_adjoint(exec, view, frames, ys, atys); });
        row("At(A d) fused, on the fly",
            [&] { kn::normal_apply(exec, view, frames, xs, atys, kn::View<float>{}); });
    }
}

/// The batch sizes of the batch tables, their repetitions and row labels.
constexpr int bench_batches[] = {1, 4, 16};

int batch_repetitions(const BenchConfig& config) { return std::max(10, config.repetitions); }

std::string frames_label(int batch)
{
    return std::to_string(batch) + " frame" + (batch > 1 ? "s" : "");
}

}  // namespace

void add_cuda_operator_rows(BenchTable& table, const BenchProblem& p, const Executor& exec,
                            const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int runs = std::max(50, config.repetitions);
    const kn::Array<float> x{exec, p.x}, y{exec, p.y};
    kn::Array<float> ax{exec, static_cast<kn::size_type>(p.y.size())};
    kn::Array<float> aty{exec, static_cast<kn::size_type>(p.x.size())};
    const auto csr = p.csr->view(exec);
    const auto ell = p.sliced_ell->view(exec);
    const auto fly = p.on_the_fly->view(exec);
    auto row = [&](const std::string& variant, const std::function<void()>& work) {
        table.add({"gpu operators", p.name, variant, device, timed(exec, runs, work), ""});
    };
    using kn::Accumulation;
    row("A x, simple CSR (thread per row)", [&] { kn::apply(exec, csr, 1, cview(x), ax.view()); });
    row("At y, simple CSR (thread per row, atomics)", [&] {
        kn::apply_adjoint_accumulating(exec, csr, 1, cview(y), aty.view(),
                                       Accumulation::global_atomics);
    });
    row("A x, ELLPACK-T", [&] { kn::apply(exec, ell, 1, cview(x), ax.view()); });
    row("At y, ELLPACK-T (global atomics)", [&] {
        kn::apply_adjoint_accumulating(exec, ell, 1, cview(y), aty.view(),
                                       Accumulation::global_atomics);
    });
    row("A x, shared memory (x in smem, ELLPACK-T)",
        [&] { kn::apply_shared_x(exec, ell, cview(x), ax.view()); });
    row("At y, shared memory (block image in smem, ELLPACK-T)", [&] {
        kn::apply_adjoint_accumulating(exec, ell, 1, cview(y), aty.view(),
                                       Accumulation::shared_memory);
    });
    row("A x, on the fly", [&] { kn::apply(exec, fly, 1, cview(x), ax.view()); });
    row("At y, on the fly (block image in smem)",
        [&] { kn::apply_adjoint(exec, fly, 1, cview(y), aty.view()); });
    row("At(A d) fused, ELLPACK-T",
        [&] { kn::normal_apply(exec, ell, 1, cview(x), aty.view(), kn::View<float>{}); });
    row("At(A d) fused, on the fly",
        [&] { kn::normal_apply(exec, fly, 1, cview(x), aty.view(), kn::View<float>{}); });
    kn::CusparseCsr sparse{exec, host_csr(p.csr->csr())};
    row("A x, cuSPARSE CSR", [&] { sparse.apply(cview(x), ax.view()); });
    row("At y, cuSPARSE CSR (stored transpose)", [&] { sparse.apply_adjoint(cview(y), aty.view()); });
    row("At y, cuSPARSE CSR (op = transpose)",
        [&] { sparse.apply_adjoint_op_transpose(cview(y), aty.view()); });
}

void add_cuda_solve_rows(BenchTable& table, const BenchProblem& p, const Executor& exec,
                         const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int reps = std::max(20, config.repetitions);
    auto options = [&](recon::SolveLaunch launch, recon::CgnrForm form) {
        recon::SolverOptions o;
        o.max_iterations = config.iterations;
        o.tolerance = 0.0;
        o.launch = launch;
        o.form = form;
        o.status_check_interval = config.iterations;  // stream launches: no host sync per iteration
        return o;
    };
    using recon::CgnrForm;
    using recon::SolveLaunch;
    const std::vector<SolveCase> cases{
        // The default where n is small: the normal matrix on chip (formed
        // once per solver from the model; the gradient at the start and at
        // each residual replacement still comes from the rows of A).
        {"ours one launch (persistent), normal matrix AᵀA on chip", p.sliced_ell.get(), {},
         options(SolveLaunch::persistent, CgnrForm::fused)},
        {"ours one launch (persistent) CGLS1, ELLPACK-T", p.sliced_ell.get(), {},
         options(SolveLaunch::persistent, CgnrForm::cgls1)},
        {"ours one launch (graph), ELLPACK-T", p.sliced_ell.get(), {},
         options(SolveLaunch::graph, CgnrForm::fused)},
        {"ours one launch (graph), on the fly", p.on_the_fly.get(), {},
         options(SolveLaunch::graph, CgnrForm::fused)},
        {"ours unfused stream launches, ELLPACK-T", p.sliced_ell.get(), {},
         options(SolveLaunch::host_loop, CgnrForm::fused)},
    };
    for (const auto& c : cases) {
        const SolveOutcome o = run_solver(c, exec, 1, p.b, reps);
        table.add({"gpu solve", p.name, c.name, device, o.timing, solve_note(p.csr->csr(), o, p.b)});
    }
    // The persistent kernel's other paths, selected through its environment
    // switches (kernels/cuda/persistent.cu): on the rows of A instead of the
    // normal matrix, how the block images are combined, and how the blocks
    // treat their rows.
    struct Variant {
        const char* name;
        const recon::SystemModel* model;
        const char* rows;  // RECON_PERSISTENT_ROWS
        const char* variable = nullptr;
        const char* value = nullptr;
    };
    const std::vector<Variant> variants{
        {"ours one launch (persistent), ELLPACK-T staged in shared memory", p.sliced_ell.get(),
         "staged"},
        {"ours one launch (persistent), on the fly, made once into shared memory",
         p.on_the_fly.get(), "staged"},
        {"ours one launch (persistent), ELLPACK-T staged, entries in column order",
         p.sliced_ell_by_column.get(), "staged"},
        {"ours one launch (persistent, two block reductions per iteration), ELLPACK-T staged",
         p.sliced_ell.get(), "staged", "RECON_PERSISTENT_TWO_REDUCTIONS", "1"},
        {"ours one launch (persistent, two-phase sums), ELLPACK-T staged", p.sliced_ell.get(),
         "staged", "RECON_PERSISTENT_TWO_PHASE", "1"},
        {"ours one launch (persistent), ELLPACK-T read from L2 every pass", p.sliced_ell.get(),
         "system"},
        {"ours one launch (persistent), on the fly, made every pass", p.on_the_fly.get(),
         "system"},
        {"ours one launch (persistent), ELLPACK-T from L2, float atomics", p.sliced_ell.get(),
         "float"},
    };
    for (const auto& v : variants) {
        const ScopedSwitch rows{"RECON_PERSISTENT_ROWS", v.rows};
        std::optional<ScopedSwitch> on;
        if (v.variable != nullptr) on.emplace(v.variable, v.value);
        const SolveCase c{v.name, v.model, {}, options(SolveLaunch::persistent, CgnrForm::fused)};
        const SolveOutcome o = run_solver(c, exec, 1, p.b, reps);
        table.add({"gpu solve", p.name, c.name, device, o.timing, solve_note(p.csr->csr(), o, p.b)});
    }
    {
        // The graph's update and β step, then its direction step, as two
        // launches instead of one cooperative launch (RECON_UPDATE_DIRECTION).
        const ScopedSwitch split{"RECON_UPDATE_DIRECTION", "split"};
        const SolveCase c{"ours one launch (graph), ELLPACK-T, update and direction split",
                          p.sliced_ell.get(), {}, options(SolveLaunch::graph, CgnrForm::fused)};
        const SolveOutcome o = run_solver(c, exec, 1, p.b, reps);
        table.add({"gpu solve", p.name, c.name, device, o.timing, solve_note(p.csr->csr(), o, p.b)});
    }
    add_cusparse_cgls_rows(table, "gpu solve", p.name, p.csr->csr(), p.b, exec, config.iterations,
                           reps);
    // Our CPU path on the same problem (one timed run).
    SolveCase cpu{"cpu ours fused, CSR", p.csr.get(), {},
                  options(SolveLaunch::host_loop, CgnrForm::fused)};
    recon::CgnrSolver solver{*cpu.model, cpu.regularizer, cpu.options, Executor::cpu(), 1};
    const Timing timing = measure(0, 1, [&] {
        std::copy(p.b.begin(), p.b.end(), solver.input().data);
        return host_timed_ms(Executor::cpu(),
                             [&] { solver.solve(recon::InitialImage::zero); });
    });
    table.add({"gpu solve", p.name, cpu.name, "cpu", timing, ""});
}

void add_cuda_ct_rows(BenchTable& table, const Executor& exec, const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int reps = std::max(5, config.repetitions);
    const kn::index_t size = 256;
    std::vector<double> angles;
    for (int k = 0; k < 180; ++k) angles.push_back(k);
    const recon::Parallel2d fly{size, size, size, angles, 0.0};
    // b = A x of a disc phantom with an off-centre insert.
    std::vector<float> phantom(static_cast<std::size_t>(size) * size, 0.0f);
    for (int iy = 0; iy < size; ++iy) {
        for (int ix = 0; ix < size; ++ix) {
            const double dx = ix - 127.5, dy = iy - 127.5;
            float v = dx * dx + dy * dy < 100.0 * 100.0 ? 1.0f : 0.0f;
            if ((dx - 30) * (dx - 30) + (dy + 20) * (dy + 20) < 25.0 * 25.0) v += 0.5f;
            phantom[static_cast<std::size_t>(iy) * size + ix] = v;
        }
    }
    std::vector<float> b(static_cast<std::size_t>(fly.rows()));
    fly.apply(Executor::cpu(), {phantom.data(), static_cast<kn::size_type>(phantom.size())},
              {b.data(), static_cast<kn::size_type>(b.size())});
    add_ct_operator_rows(table, fly, exec, config);
    const recon::CsrMatrix csr = fly.materialize();
    const recon::StoredMatrix stored{csr, recon::MatrixLayout::sliced_ell, "ct_256"};
    // configs/ct-256.ini: regularizer = tv:25, tv_epsilon = 0.01
    const auto tv = recon::Regularizer::parse("tv:25", 0.01);

    auto options = [&](recon::SolveLaunch launch) {
        recon::SolverOptions o;
        o.max_iterations = config.iterations;
        o.tolerance = 0.0;
        o.launch = launch;
        o.status_check_interval = config.iterations;
        return o;
    };
    using recon::SolveLaunch;
    const std::vector<SolveCase> cases{
        {"ours one launch (graph), on the fly, TV", &fly, tv, options(SolveLaunch::graph)},
        {"ours unfused stream launches, on the fly, TV", &fly, tv, options(SolveLaunch::host_loop)},
        {"ours one launch (graph), ELLPACK-T stored, TV", &stored, tv, options(SolveLaunch::graph)},
        {"ours one launch (graph), on the fly, no regularizer", &fly, {},
         options(SolveLaunch::graph)},
    };
    for (const auto& c : cases) {
        const SolveOutcome o = run_solver(c, exec, 1, b, reps);
        table.add({"gpu solve", "ct_256", c.name, device, o.timing, solve_note(csr, o, b)});
    }
    // The same solve down the solver's other paths, through the kernels'
    // switches: one frame's A x by staged lines (RECON_PARALLEL2D_RAYS); the
    // step after the adjoint as a cooperative launch of its own, or as the
    // update and β step and the direction step (RECON_UPDATE_DIRECTION).
    // Then the 4 sensors' frames together (each product one pass over the
    // rays), by default and split.
    struct Switched {
        const char* name;
        int batch;
        const char* variable;
        const char* value;
    };
    const std::vector<Switched> switched{
        {"ours one launch (graph), on the fly, TV, A x by staged image lines", 1,
         "RECON_PARALLEL2D_RAYS", "lines"},
        {"ours one launch (graph), on the fly, TV, cooperative step apart", 1,
         "RECON_UPDATE_DIRECTION", "cooperative"},
        {"ours one launch (graph), on the fly, TV, update and direction split", 1,
         "RECON_UPDATE_DIRECTION", "split"},
        {"4 frames together, graph, on the fly, TV", 4, "RECON_UPDATE_DIRECTION", "auto"},
        {"4 frames together, graph, on the fly, TV, update and direction split", 4,
         "RECON_UPDATE_DIRECTION", "split"},
    };
    for (const auto& v : switched) {
        const ScopedSwitch on{v.variable, v.value};
        const SolveCase c{v.name, &fly, tv, options(SolveLaunch::graph)};
        const SolveOutcome o = run_solver(c, exec, v.batch, b, reps);
        if (v.batch == 1) {
            table.add({"gpu solve", "ct_256", c.name, device, o.timing, solve_note(csr, o, b)});
        } else {
            table.add({"gpu batch", "ct_256", c.name, device, o.timing,
                       batch_note(v.batch, o.timing, o.results, worst_residual(csr, o.image, b))});
        }
    }
    add_cusparse_cgls_rows(table, "gpu solve", "ct_256", csr, b, exec, config.iterations, reps,
                           ", no regularizer (CGLS)");
    // CPU: a tenth of the iterations, scaled (noted), to keep the bench short.
    recon::SolverOptions cpu_options = options(SolveLaunch::host_loop);
    cpu_options.max_iterations = std::max(1, config.iterations / 10);
    recon::CgnrSolver solver{fly, tv, cpu_options, Executor::cpu(), 1};
    Timing timing = measure(0, 1, [&] {
        std::copy(b.begin(), b.end(), solver.input().data);
        return host_timed_ms(Executor::cpu(),
                             [&] { solver.solve(recon::InitialImage::zero); });
    });
    const double scale = static_cast<double>(config.iterations) / cpu_options.max_iterations;
    for (double& t : timing.runs_ms) t *= scale;
    table.add({"gpu solve", "ct_256", "cpu ours fused, on the fly, TV", "cpu", timing,
               std::to_string(cpu_options.max_iterations) + " it timed, scaled x" + fmt(scale)});
}

void add_cuda_batch_rows(BenchTable& table, const BenchProblem& p, const Executor& exec,
                         const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int reps = batch_repetitions(config);
    for (const int batch : bench_batches) {
        const std::string frames = frames_label(batch);
        // The persistent kernel's default (the normal matrix on chip where
        // n is small, its frames sharing each pass over it), the same kernel
        // on the rows of A, and the graph.
        struct Variant {
            recon::SolveLaunch launch;
            const char* rows;  // RECON_PERSISTENT_ROWS
            const char* name;
        };
        const Variant variants[] = {
            {recon::SolveLaunch::persistent, "auto", "persistent, normal matrix AᵀA on chip"},
            {recon::SolveLaunch::persistent, "staged", "persistent, ELLPACK-T staged"},
            {recon::SolveLaunch::graph, "auto", "graph, ELLPACK-T"},
        };
        for (const Variant& v : variants) {
            const ScopedSwitch rows{"RECON_PERSISTENT_ROWS", v.rows};
            recon::SolverOptions o;
            o.max_iterations = config.iterations;
            o.launch = v.launch;
            SolveCase c{"", p.sliced_ell.get(), {}, o};
            recon::CgnrSolver probe{*c.model, {}, o, exec, batch};
            if (v.launch == recon::SolveLaunch::persistent) {
                kn::fill(exec, probe.input(), 0.0f);
                try {
                    // tells whether the batch fits the persistent kernel
                    probe.solve(recon::InitialImage::zero);
                } catch (const std::invalid_argument&) {
                    continue;
                }
            }
            const SolveOutcome out = run_solver(c, exec, batch, p.b, reps);
            table.add({"gpu batch", p.name, frames + " together, " + v.name, device, out.timing,
                       batch_note(batch, out.timing, out.results,
                                  worst_residual(p.csr->csr(), out.image, p.b))});
        }
    }
}

// add_cuda_rows measures these last: once work has been queued on many
// streams, every later solve of the process on its own stream runs 2-4 %
// slower, ours and cuSPARSE's alike, even after those streams are destroyed
// (docs/gpu-performance.md, history v47). No other row uses more than one
// stream; the pipeline uses two a worker (FrameSolver's compute and copy).
void add_cuda_stream_batch_rows(BenchTable& table, const BenchProblem& p, const Executor& exec,
                                const BenchConfig& config)
{
    const std::string device = kn::device_name(exec);
    const int reps = batch_repetitions(config);
    for (const int batch : bench_batches) {
        const std::string frames = frames_label(batch);
        std::vector<kn::BenchStream> streams;
        std::vector<Executor> execs;
        std::vector<std::unique_ptr<recon::CgnrSolver>> solvers;
        recon::SolverOptions o;
        o.max_iterations = config.iterations;
        o.launch = recon::SolveLaunch::graph;
        for (int f = 0; f < batch; ++f) {
            streams.emplace_back(exec.device());
            execs.push_back(exec.with_stream(streams.back().get()));
        }
        for (int f = 0; f < batch; ++f) {
            solvers.push_back(
                std::make_unique<recon::CgnrSolver>(*p.sliced_ell, recon::Regularizer{}, o, execs[f], 1));
        }
        std::vector<kn::Array<float>> staged;
        for (int f = 0; f < batch; ++f) staged.emplace_back(execs[f], p.b);
        for (auto& e : execs) e.synchronize();
        const Timing t = measure(1, reps, [&] {
            return kn::time_on_device_ms(execs, [&] {
                for (int f = 0; f < batch; ++f) {
                    kn::copy(execs[f], solvers[f]->input(), execs[f], cview(staged[f]));
                    solvers[f]->solve(recon::InitialImage::zero);
                }
            });
        });
        std::vector<recon::FrameResult> results;
        std::vector<float> images;
        for (int f = 0; f < batch; ++f) {
            results.push_back(solvers[f]->results().front());
            const auto x = download(execs[f], solvers[f]->image(), p.sliced_ell->cols());
            images.insert(images.end(), x.begin(), x.end());
        }
        table.add({"gpu batch", p.name, frames + ", one graph per stream, ELLPACK-T", device, t,
                   batch_note(batch, t, results, worst_residual(p.csr->csr(), images, p.b))});
    }
}

void add_cuda_rows(BenchTable& table, const std::vector<const BenchProblem*>& problems,
                   const Executor& exec, const BenchConfig& config)
{
    table.set_baseline("gpu solve", cuda_solve_baseline);
    for (const BenchProblem* p : problems) {
        if (config.wants("operators")) add_cuda_operator_rows(table, *p, exec, config);
        if (config.wants("solve")) add_cuda_solve_rows(table, *p, exec, config);
        if (config.wants("batch")) add_cuda_batch_rows(table, *p, exec, config);
    }
    if (config.wants("ct")) add_cuda_ct_rows(table, exec, config);
    if (!config.wants("batch")) return;
    for (const BenchProblem* p : problems) add_cuda_stream_batch_rows(table, *p, exec, config);
}

}  // namespace recon::pipeline
