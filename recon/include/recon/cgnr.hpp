#pragma once
// The CGNR solver of DESIGN §3, written once over the kernels' primitives:
// the same code runs on the CPU and on a CUDA stream.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kernels/executor.hpp"
#include "kernels/memory.hpp"
#include "kernels/solver_state.hpp"
#include "recon/regularizer.hpp"
#include "recon/system_model.hpp"

namespace recon::kernels {
class SolveGraph;  // kernels/include/kernels/graph.hpp: an instantiated CUDA graph
struct PersistentCgnrProblem;  // kernels/include/kernels/persistent.hpp
}  // namespace recon::kernels

namespace recon {

using kernels::SolveStatus;

enum class CgnrForm {
    fused,  // h = Aᵀr tracked in image space (CGLS2-like), with residual replacement
    cgls1,  // r kept in measurement space, h = Aᵀr formed each iteration (stable)
};

CgnrForm parse_cgnr_form(const std::string& text);
const char* to_string(CgnrForm form);

/// How a solve is launched on a CUDA executor (the CPU always loops on the host).
enum class SolveLaunch {
    automatic,   // persistent when the batch's images fit one block (one frame, or
                 // no regularizer; one frame of few columns on AᵀA), else graph
    host_loop,   // one stream launch per kernel, stop flags read every status_check_interval
    graph,       // the whole solve as one CUDA graph launch
    persistent,  // one persistent cooperative kernel with grid-wide syncs
};

SolveLaunch parse_solve_launch(const std::string& text);
const char* to_string(SolveLaunch launch);

/// Where a solve starts.
enum class InitialImage {
    given,  // image() holds x0 (e.g. the sensor's previous image: a warm start)
    zero,   // x0 = 0: the solver zeroes image() itself, and since r0 = −b it
            // takes h0 = −Aᵀb from the product ‖Aᵀb‖ needs anyway, without
            // forming A x0 and its adjoint (the same values as `given` from zeros)
};

struct SolverOptions {
    int max_iterations = 400;
    double tolerance = 0.0;        // stop when ‖g‖ ≤ tolerance ‖Aᵀb‖ (= ‖g0‖ from x0 = 0); 0: only
                                   // when g is exactly 0 (the fused form's recurrence can get there)
    CgnrForm form = CgnrForm::fused;
    int residual_replacement = 50;  // fused form: recompute h = Aᵀ(Ax − b) every K; 0: never
    int status_check_interval = 1;  // host loop: read the stop flags every this many iterations
    SolveLaunch launch = SolveLaunch::automatic;
    int graph_unroll = 10;          // graph: iterations per turn of the conditional loop

    /// Throws std::invalid_argument naming the bad option.
    void validate() const;
};

/// The outcome of one frame's solve.
struct FrameResult {
    int iterations = 0;
    double rel_gradient = 0.0;  // ‖g‖ / ‖Aᵀb‖ at the end
    SolveStatus status = SolveStatus::running;
};

/// Hook for reporting (instead of prints). Called on the calling thread.
class SolveObserver {
public:
    virtual ~SolveObserver() = default;
    /// After a status check of the host loop: iteration k of the batch and
    /// each frame's relative gradient so far.
    virtual void on_iteration(int /*k*/, const std::vector<double>& /*rel_gradient*/) {}
    /// After solve(): results per frame and the host wall time of the solve.
    virtual void on_solve(const std::vector<FrameResult>& /*results*/, double /*wall_ms*/) {}
};

/// Solves `batch` frames at once against one system model and regularizer.
/// All work buffers are allocated in the constructor, in exec's memory; a
/// solve allocates nothing. Use: write b into input() and either the initial
/// guess into image() (the previous image for a warm start) and call solve(),
/// or call solve(InitialImage::zero); read image() and results().
class CgnrSolver {
public:
    CgnrSolver(const SystemModel& system, Regularizer regularizer, SolverOptions options,
               const Executor& exec, int batch = 1);
    ~CgnrSolver();
    CgnrSolver(const CgnrSolver&) = delete;
    CgnrSolver& operator=(const CgnrSolver&) = delete;

    /// Measurements b, [batch][m] in exec's memory.
    View<float> input() { return b_.view(); }
    /// Images x, [batch][n] in exec's memory: initial guess in, solution out.
    View<float> image() { return x_.view(); }

    /// Runs the iteration until every frame has stopped. On the CPU it
    /// returns when done. On CUDA it is queued on exec.stream(): the host
    /// loop reads the stop flags every options.status_check_interval
    /// iterations (so it waits for the device); the graph and persistent
    /// launches only queue work and return at once (the first solve also
    /// captures or builds the launch, which synchronizes the stream once),
    /// unless an observer is set, which waits for the results. Until the
    /// stream has passed the solve, input() and image() must not be written
    /// by other streams or read by the host. Each start is its own graph,
    /// captured on its first solve.
    void solve(InitialImage start = InitialImage::given);
    /// Per-frame outcome of the last solve (synchronizes the executor).
    std::vector<FrameResult> results() const;
    /// Queues a copy of the per-frame solver state of the last solve into
    /// `host` ([batch] elements of host memory; pinned memory makes the copy
    /// asynchronous) on exec.stream(), in stream order after the solve.
    /// Does not synchronize: read the elements with frame_result() once the
    /// stream has passed this point (e.g. an Event recorded after it).
    void queue_results_copy(View<kernels::CgnrScalars> host) const;
    /// The outcome recorded in one frame's solver state (what results()
    /// returns per frame).
    static FrameResult frame_result(const kernels::CgnrScalars& scalars);

    void set_observer(SolveObserver* observer) { observer_ = observer; }
    int batch() const { return batch_; }
    const Executor& executor() const { return exec_; }
    const SolverOptions& options() const { return options_; }
    /// How solve() launches: host_loop on the CPU, else options().launch
    /// with `automatic` resolved.
    SolveLaunch launch() { return exec_.is_cpu() ? SolveLaunch::host_loop : resolve_launch(); }
    const SystemModel& system() const { return system_; }
    const Regularizer& regularizer() const { return regularizer_; }

    /// The two halves of solve(), exposed so that a whole solve can be
    /// captured into a CUDA graph: initialize() forms r0, h0, g0, d0 (from
    /// zero, x0 too); iterate(k) performs iteration k for every running frame.
    void initialize(InitialImage start = InitialImage::given);
    void iterate(int k);
    /// True while any frame's status is running (reads scalars: synchronizes).
    bool any_running() const;

private:
    void form_data_gradient();  // h = Aᵀ(A x − b), via r
    void solve_host_loop(InitialImage start);
    void solve_graph(InitialImage start);  // recon/src/cgnr_graph.cpp
    void solve_persistent(InitialImage start);  // recon/src/cgnr_graph.cpp
    /// The launch `automatic` resolves to on this solver's executor and batch.
    SolveLaunch resolve_launch();  // recon/src/cgnr_graph.cpp
    /// This solver's buffers and settings as the persistent kernel takes them.
    kernels::PersistentCgnrProblem persistent_problem();  // recon/src/cgnr_graph.cpp

    const SystemModel& system_;
    Regularizer regularizer_;
    SolverOptions options_;
    Executor exec_;
    int batch_;
    kernels::SystemView view_;
    kernels::ImageGrid grid_;
    kernels::CgnrParams params_;
    SolveObserver* observer_ = nullptr;

    kernels::Array<float> b_, x_;      // input, image
    kernels::Array<float> r_, q_;      // measurement space: residual, A d
    kernels::Array<float> h_, g_, d_;  // Aᵀr, gradient, direction
    kernels::Array<float> d_cache_;    // d in the system's own layout, where it keeps one
    kernels::Array<float> u_, e_;      // Aᵀ A d, u + F(x, d)
    kernels::Array<float> state_;      // regularizer state from the lagged image
    kernels::Array<float> fx_;         // F(x, x), for the fused form's one-pass x, h, g step
    kernels::Array<kernels::CgnrScalars> scalars_;
    kernels::Array<float> normal_;     // AᵀA, where the persistent solve iterates on it
    struct GraphDeleter {
        void operator()(kernels::SolveGraph* graph) const;  // cgnr_graph.cpp
    };
    // One per InitialImage, made on its first solve. The persistent kernel
    // forms r0 itself: its one launch serves a zero start after a fill.
    std::unique_ptr<kernels::SolveGraph, GraphDeleter> graphs_[2];
};

/// Convenience for one frame on the host: returns x solving the problem
/// from x0 (zeros when empty).
std::vector<float> solve_cgnr(const SystemModel& system, const Regularizer& regularizer,
                              const SolverOptions& options, const Executor& exec,
                              const std::vector<float>& b, const std::vector<float>& x0 = {},
                              FrameResult* result = nullptr);

}  // namespace recon
