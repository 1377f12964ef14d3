// The CGNR solver of DESIGN §3, line by line over the kernels' primitives.
// Backend-free: the same calls run on the CPU and are queued on a CUDA
// stream (and can be captured into a graph: see cgnr_graph.cpp).

#include "recon/cgnr.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "kernels/primitives.hpp"

namespace recon {

namespace kn = recon::kernels;

CgnrForm parse_cgnr_form(const std::string& text)
{
    if (text == "fused") return CgnrForm::fused;
    if (text == "cgls1") return CgnrForm::cgls1;
    throw std::invalid_argument{"unknown solver form '" + text + "' (expected fused or cgls1)"};
}

const char* to_string(CgnrForm form) { return form == CgnrForm::fused ? "fused" : "cgls1"; }

SolveLaunch parse_solve_launch(const std::string& text)
{
    if (text == "auto" || text == "automatic") return SolveLaunch::automatic;
    if (text == "host_loop" || text == "stream") return SolveLaunch::host_loop;
    if (text == "graph") return SolveLaunch::graph;
    if (text == "persistent") return SolveLaunch::persistent;
    throw std::invalid_argument{"unknown launch '" + text +
                                "' (expected auto, host_loop, graph or persistent)"};
}

const char* to_string(SolveLaunch launch)
{
    switch (launch) {
    case SolveLaunch::automatic: return "auto";
    case SolveLaunch::host_loop: return "host_loop";
    case SolveLaunch::graph: return "graph";
    case SolveLaunch::persistent: return "persistent";
    }
    return "unknown";
}

void SolverOptions::validate() const
{
    if (max_iterations <= 0) {
        throw std::invalid_argument{"solver.max_iterations must be positive, found " +
                                    std::to_string(max_iterations)};
    }
    if (!std::isfinite(tolerance) || tolerance < 0.0) {
        throw std::invalid_argument{"solver.tolerance must be a finite number >= 0"};
    }
    if (residual_replacement < 0) {
        throw std::invalid_argument{"solver.residual_replacement must be >= 0, found " +
                                    std::to_string(residual_replacement)};
    }
    if (status_check_interval <= 0) {
        throw std::invalid_argument{"solver.status_check_interval must be positive"};
    }
    if (graph_unroll <= 0) throw std::invalid_argument{"solver.graph_unroll must be positive"};
}

CgnrSolver::~CgnrSolver() = default;

CgnrSolver::CgnrSolver(const SystemModel& system, Regularizer regularizer, SolverOptions options,
                       const Executor& exec, int batch)
    : system_{system}, regularizer_{std::move(regularizer)}, options_{options}, exec_{exec},
      batch_{batch}
{
    options_.validate();
    if (batch_ <= 0) throw std::invalid_argument{"solver batch must be positive"};
    view_ = system_.view(exec_);
    const ImageShape shape = system_.image_shape();
    grid_ = kn::ImageGrid{shape.nx, shape.ny};
    params_ = kn::CgnrParams{options_.max_iterations, options_.tolerance};

    const size_type m = static_cast<size_type>(system_.rows()) * batch_;
    const size_type n = static_cast<size_type>(system_.cols()) * batch_;
    b_ = kn::Array<float>{exec_, m};
    x_ = kn::Array<float>{exec_, n};
    r_ = kn::Array<float>{exec_, m};
    if (options_.form == CgnrForm::cgls1) q_ = kn::Array<float>{exec_, m};
    h_ = kn::Array<float>{exec_, n};
    d_ = kn::Array<float>{exec_, n};
    if (const size_type cache = kn::direction_cache_size(exec_, view_, batch_); cache > 0) {
        d_cache_ = kn::Array<float>{exec_, cache};
    }
    u_ = kn::Array<float>{exec_, n};
    if (!regularizer_.empty()) {
        g_ = kn::Array<float>{exec_, n};
        e_ = kn::Array<float>{exec_, n};
        state_ = kn::Array<float>{
            exec_, std::max<size_type>(1, kn::regularizer_state_size(regularizer_.terms(), grid_,
                                                                     batch_))};
        if (options_.form == CgnrForm::fused) fx_ = kn::Array<float>{exec_, n};
    }
    scalars_ = kn::Array<kn::CgnrScalars>{exec_, batch_};
}

// Without a regularizer F = 0, so e = u and g = h: the same buffers serve.
namespace {
View<float> or_alias(kn::Array<float>& own, kn::Array<float>& alias)
{
    return own.size() > 0 ? own.view() : alias.view();
}
View<const float> in(View<float> v) { return {v.data, v.size}; }
}  // namespace

void CgnrSolver::form_data_gradient()
{
    // r = A x − b
    kn::residual(exec_, view_, batch_, in(x_.view()), in(b_.view()), r_.view());
    // h = Aᵀ r
    kn::apply_adjoint(exec_, view_, batch_, in(r_.view()), h_.view());
}

void CgnrSolver::initialize(InitialImage start)
{
    const View<float> g = or_alias(g_, h_);
    // The relative stop test measures ‖g‖ against ‖Aᵀb‖, the gradient at
    // x = 0 (F(0, 0) = 0 for every term), not against ‖g0‖: a warm start
    // begins with a small g0 and must not be asked to shrink it as much again.
    // (One adjoint pass per solve; u is free until the first iteration.)
    kn::apply_adjoint(exec_, view_, batch_, in(b_.view()), u_.view());
    if (start == InitialImage::zero) {
        // x0 = 0, so r0 = −b and h0 = Aᵀr0 = −Aᵀb: negation is exact, so
        // these are the values A·0 − b and its adjoint would give, without
        // those two passes
        kn::fill(exec_, x_.view(), 0.0f);
        kn::axpby(exec_, -1.0f, in(u_.view()), 0.0f, in(u_.view()), h_.view());
        // CGLS1 carries r itself from here on
        if (options_.form == CgnrForm::cgls1) {
            kn::axpby(exec_, -1.0f, in(b_.view()), 0.0f, in(b_.view()), r_.view());
        }
    } else {
        // r0 = A x0 − b;  h0 = Aᵀ r0
        form_data_gradient();
    }
    // g0 = h0 + F(x0, x0)
    if (!regularizer_.empty()) {
        kn::regularizer_prepare(exec_, regularizer_.terms(), grid_, batch_, in(x_.view()),
                                state_.view());
        kn::regularizer_apply_add(exec_, regularizer_.terms(), grid_, batch_, in(state_.view()),
                                  in(h_.view()), in(x_.view()), g);
    }
    // d0 = −g0
    kn::cgnr_init(exec_, params_, batch_, in(g), in(u_.view()), d_.view(), scalars_.view());
    kn::direction_cache_fill(exec_, view_, batch_, in(d_.view()), d_cache_.view());
}

void CgnrSolver::iterate(int k)
{
    const bool regularized = !regularizer_.empty();
    const bool cgls1 = options_.form == CgnrForm::cgls1;
    // h_k is refreshed after every K recurrence steps, at k = K, 2K, …: not
    // at k = 0, where the start formed h_0 itself, nor at the last iteration
    // of a solve whose length K divides, where it would reach x only through
    // that iteration's α (docs/solver.md)
    const bool replace = !cgls1 && options_.residual_replacement > 0 && k > 0 &&
                         k % options_.residual_replacement == 0;
    // The fused form between replacements moves x, h and g in one pass.
    const bool one_pass = !cgls1 && !replace;
    const View<float> g = or_alias(g_, h_);
    const View<float> e = or_alias(e_, u_);
    // base + F(x_k, v), for the steps that compute it in their own pass
    const auto fold = [&](View<float> base, View<float> v) {
        return kn::RegularizerFold{regularizer_.terms(), grid_, in(state_.view()), in(base), in(v)};
    };

    // The state of F(x_{k+1}, ·) for the next iteration (the lag moves on),
    // made in the direction step's pass.
    const kn::RegularizerPrepare prepare{regularizer_.terms(), grid_, in(x_.view()),
                                         state_.view()};
    if (one_pass) {
        // u_k = Aᵀ(A d_k);  e_k = u_k + F(x_k, d_k);  F(x_k, x_k) into fx_
        // (which exists for the fused form with a regularizer);
        // f_k = d_kᵀ e_k;  g_kᵀ d_k;
        // α_k;  x_{k+1} = x_k + α_k d_k;  h_{k+1} = h_k + α_k u_k;
        // g_{k+1} = h_k + F(x_k, x_k) + α_k e_k = h_{k+1} + F(x_k, x_{k+1})
        // (F is linear in its second argument);  β_k and the stop tests;
        // d_{k+1} = −g_{k+1} + β_k d_k and the state   (one call: two to
        // four launches; u, e and fx are scratch here, nothing reads them
        // before the next step writes them again)
        kn::cgnr_step_one_pass(exec_, view_, params_, batch_, d_.view(), u_.view(),
                               fold(u_.view(), d_.view()), e, fx_.view(), x_.view(), h_.view(), g,
                               d_cache_.view(), scalars_.view(), prepare);
        return;
    }
    if (!cgls1) {
        // The iteration a residual replacement starts (one call): against
        // CGLS2 drift, h_k = Aᵀ(A x_k − b) in place of the recurrence's h_k;
        // then the one-pass step above from it
        kn::cgnr_step_replacement(exec_, view_, params_, batch_, d_.view(), u_.view(),
                                  fold(u_.view(), d_.view()), e, fx_.view(), x_.view(),
                                  in(b_.view()), r_.view(), h_.view(), g, d_cache_.view(),
                                  scalars_.view(), prepare);
        return;
    }
    // CGLS1. u_k = Aᵀ(A d_k), in one pass over A, keeping q_k = A d_k;
    // e_k = u_k + F(x_k, d_k);  f_k = d_kᵀ e_k;  g_kᵀ d_k   (one pass, or the
    // product's epilogue)
    kn::cgnr_step_normal_dots(exec_, view_, batch_, in(d_.view()), u_.view(), q_.view(),
                              fold(u_.view(), d_.view()), in(g), e, scalars_.view(),
                              in(x_.view()), {}, in(d_cache_.view()));
    // α_k = −(g_kᵀ d_k) / f_k;  x_{k+1} = x_k + α_k d_k
    kn::cgnr_step_update(exec_, batch_, in(d_.view()), in(u_.view()), x_.view(), View<float>{},
                         scalars_.view());
    // r_{k+1} = r_k + α_k q_k;  h_{k+1} = Aᵀ r_{k+1}
    kn::cgnr_update_residual(exec_, batch_, in(q_.view()), r_.view(), scalars_.view());
    kn::apply_adjoint(exec_, view_, batch_, in(r_.view()), h_.view());
    // g_{k+1} = h_{k+1} + F(x_k, x_{k+1})   (state still lagged at x_k);
    // β_k = g_{k+1}ᵀ e_k / f_k; stop at max_iter or ‖g_{k+1}‖ ≤ tol ‖g_0‖   (one pass)
    if (regularized) {
        kn::cgnr_step_beta_folded(exec_, params_, batch_, fold(h_.view(), x_.view()), in(e), g,
                                  scalars_.view());
    } else {
        kn::cgnr_step_beta(exec_, params_, batch_, in(g), in(e), scalars_.view());
    }
    // d_{k+1} = −g_{k+1} + β_k d_k (and the system's copy of d), and the state
    kn::cgnr_step_direction_cached(exec_, view_, batch_, in(g), d_.view(), d_cache_.view(),
                                   scalars_.view(), prepare);
}

bool CgnrSolver::any_running() const
{
    for (const auto& s : scalars_.to_host()) {
        if (s.status == SolveStatus::running) return true;
    }
    return false;
}

void CgnrSolver::solve_host_loop(InitialImage start)
{
    initialize(start);
    for (int k = 0; k < options_.max_iterations; ++k) {
        iterate(k);
        const bool check = (k + 1) % options_.status_check_interval == 0 ||
                           k + 1 == options_.max_iterations;
        if (!check) continue;
        if (observer_ != nullptr) {
            std::vector<double> rel;
            for (const auto& r : results()) rel.push_back(r.rel_gradient);
            observer_->on_iteration(k + 1, rel);
        }
        if (!any_running()) break;
    }
}

void CgnrSolver::solve(InitialImage start)
{
    const auto began = std::chrono::steady_clock::now();
    switch (launch()) {
    case SolveLaunch::graph: solve_graph(start); break;
    case SolveLaunch::persistent: solve_persistent(start); break;
    default: solve_host_loop(start); break;
    }
    if (observer_ != nullptr) {
        const auto res = results();
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
                .count();
        observer_->on_solve(res, ms);
    }
}

FrameResult CgnrSolver::frame_result(const kn::CgnrScalars& scalars)
{
    FrameResult r;
    r.iterations = scalars.iterations;
    r.status = scalars.status;
    r.rel_gradient = scalars.gg0 > 0 ? std::sqrt(scalars.gg / scalars.gg0) : 0.0;
    return r;
}

std::vector<FrameResult> CgnrSolver::results() const
{
    std::vector<FrameResult> out;
    for (const auto& s : scalars_.to_host()) out.push_back(frame_result(s));
    return out;
}

void CgnrSolver::queue_results_copy(View<kn::CgnrScalars> host) const
{
    if (host.size != scalars_.size()) {
        throw std::invalid_argument{"CgnrSolver::queue_results_copy: expected room for " +
                                    std::to_string(scalars_.size()) + " frames, found " +
                                    std::to_string(host.size)};
    }
    kn::copy(Executor::cpu(), host, exec_,
             View<const kn::CgnrScalars>{scalars_.data(), scalars_.size()});
}

std::vector<float> solve_cgnr(const SystemModel& system, const Regularizer& regularizer,
                              const SolverOptions& options, const Executor& exec,
                              const std::vector<float>& b, const std::vector<float>& x0,
                              FrameResult* result)
{
    if (static_cast<index_t>(b.size()) != system.rows()) {
        throw std::invalid_argument{"solve_cgnr: b has " + std::to_string(b.size()) +
                                    " values, the system has " + std::to_string(system.rows()) +
                                    " rows"};
    }
    CgnrSolver solver{system, regularizer, options, exec, 1};
    kn::copy(exec, solver.input(), Executor::cpu(), View<const float>{b.data(), static_cast<size_type>(b.size())});
    if (!x0.empty()) {
        if (static_cast<index_t>(x0.size()) != system.cols()) {
            throw std::invalid_argument{"solve_cgnr: x0 size does not match the system"};
        }
        kn::copy(exec, solver.image(), Executor::cpu(),
                 View<const float>{x0.data(), static_cast<size_type>(x0.size())});
    }
    solver.solve(x0.empty() ? InitialImage::zero : InitialImage::given);
    if (result != nullptr) *result = solver.results().front();
    std::vector<float> x(static_cast<std::size_t>(system.cols()));
    kn::copy(Executor::cpu(), View<float>{x.data(), static_cast<size_type>(x.size())}, exec,
             View<const float>{solver.image().data, solver.image().size});
    exec.synchronize();
    return x;
}

}  // namespace recon
