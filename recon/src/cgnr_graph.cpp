// Graph and persistent launches of the CGNR solver (CUDA executors only):
// the whole solve becomes one launch on the executor's stream. The graph is
// captured from initialize() and iterate(k) themselves, so it runs exactly
// the shipped host-loop code; the persistent kernel is a second, free-form
// implementation of the same iteration.

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "kernels/graph.hpp"
#include "kernels/persistent.hpp"
#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"

namespace recon {

void CgnrSolver::GraphDeleter::operator()(kernels::SolveGraph* graph) const { delete graph; }

namespace {

/// Iterations per turn of the graph's loop. iterate(k) replaces the residual
/// when k > 0 and k % K == 0, so with replacement the body is a whole
/// multiple of K, and a body captured as iterations turn, …, 2 turn − 1
/// reproduces the schedule of every turn after the first.
int body_iterations(const SolverOptions& options)
{
    const int unroll = options.graph_unroll;
    const int k = options.form == CgnrForm::fused ? options.residual_replacement : 0;
    if (k <= 0) return unroll;
    return ((unroll + k - 1) / k) * k;
}

}  // namespace

void CgnrSolver::solve_graph(InitialImage start)
{
    if (exec_.is_cpu()) throw std::logic_error{"solve_graph needs a CUDA executor"};
    auto& graph = graphs_[static_cast<int>(start)];
    if (!graph) {
        const int turn = body_iterations(options_);
        // The first turn, which has no refresh at its start, runs before the
        // loop; the loop's body is the turns that start with one
        auto captured = kernels::SolveGraph::capture(
            exec_,
            [this, start, turn] {
                initialize(start);
                for (int k = 0; k < turn; ++k) iterate(k);
            },
            [this, turn] {
                for (int k = turn; k < 2 * turn; ++k) iterate(k);
            },
            View<const kernels::CgnrScalars>{scalars_.data(), scalars_.size()}, batch_);
        graph.reset(new kernels::SolveGraph{std::move(captured)});
    }
    graph->launch(exec_);
}

kernels::PersistentCgnrProblem CgnrSolver::persistent_problem()
{
    const bool cgls1 = options_.form == CgnrForm::cgls1;
    kernels::PersistentCgnrProblem p;
    p.system = view_;
    p.terms = regularizer_.terms();
    p.grid = grid_;
    p.params = params_;
    p.cgls1 = cgls1;
    p.residual_replacement = cgls1 ? 0 : options_.residual_replacement;
    p.batch = batch_;
    // Tuning knob (see docs/gpu-performance.md): combine the blocks'
    // images in two phases instead of with atomics.
    p.two_phase_reduction = std::getenv("RECON_PERSISTENT_TWO_PHASE") != nullptr;
    p.b = View<const float>{b_.data(), b_.size()};
    p.x = x_.view();
    p.r = r_.view();
    p.q = q_.view();
    p.h = h_.view();
    p.g = g_.size() > 0 ? g_.view() : h_.view();
    p.d = d_.view();
    p.scalars = scalars_.view();
    return p;
}

SolveLaunch CgnrSolver::resolve_launch()
{
    if (options_.launch != SolveLaunch::automatic) return options_.launch;
    // The persistent kernel is the fastest one-launch form wherever the
    // batch's images fit a block and were measured: one frame (paper_large
    // on an H100: 3.6 against 9.5 ms for the graph on the rows of A, 1.9 ms
    // on the normal matrix where that applies) and batches without a
    // regularizer (4 frames on an H200: 2.9 ms on the normal matrix, 8.6 on
    // the rows of A, 18.9 as a graph; larger batches as launches of 4
    // frames). A regularized batch keeps x and the state in shared memory,
    // leaving less room for the rows: it takes the graph. See
    // docs/gpu-performance.md.
    const bool measured_faster = batch_ == 1 || regularizer_.terms().count == 0;
    return measured_faster && kernels::persistent_cgnr_supports(exec_, persistent_problem()).empty()
               ? SolveLaunch::persistent
               : SolveLaunch::graph;
}

void CgnrSolver::solve_persistent(InitialImage start)
{
    if (exec_.is_cpu()) throw std::logic_error{"solve_persistent needs a CUDA executor"};
    auto& graph = graphs_[static_cast<int>(InitialImage::given)];
    if (!graph) {
        kernels::PersistentCgnrProblem p = persistent_problem();
        if (kernels::persistent_normal_matrix_applies(exec_, p)) {
            // Formed once per solver, on the host (n ≤ 3,072: ≤ 38 MB on the device)
            const std::vector<float> g = normal_matrix(system_.materialize());
            normal_ = kernels::Array<float>{exec_, static_cast<size_type>(g.size())};
            kernels::copy(exec_, normal_.view(), Executor::cpu(),
                          View<const float>{g.data(), static_cast<size_type>(g.size())});
            exec_.synchronize();  // g leaves scope
            p.normal_matrix = View<const float>{normal_.data(), normal_.size()};
        }
        const std::string why = kernels::persistent_cgnr_supports(exec_, p);
        if (!why.empty()) {
            throw std::invalid_argument{"solver.launch=persistent: " + why +
                                        " (use solver.launch=graph)"};
        }
        graph.reset(new kernels::SolveGraph{kernels::SolveGraph::persistent(exec_, p)});
    }
    if (start == InitialImage::zero) kernels::fill(exec_, x_.view(), 0.0f);
    graph->launch(exec_);
}

}  // namespace recon
