// The CGNR solver: against double-precision references (Eigen, dense) on
// an ill-conditioned problem, against a textbook CGLS when F = 0, batching,
// warm start, stop tests and the guards.

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <numbers>

#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"
#include "reference_problems.hpp"
#include "test_utils.hpp"

namespace recon {
namespace {

using test::cview_of;
using test::view_of;
using test::Dense;
using test::Vec;
using test::ill_conditioned;
using test::to_float;
using test::to_vec;

Dense dense_of(const SystemModel& model)
{
    const CsrMatrix csr = model.materialize();
    Dense a = Dense::Zero(csr.rows, csr.cols);
    for (int i = 0; i < csr.rows; ++i) {
        for (auto k = csr.row_ptr[i]; k < csr.row_ptr[i + 1]; ++k) a(i, csr.col_idx[k]) = csr.values[k];
    }
    return a;
}

/// Dᵀ D of the forward-difference gradient on an nx x ny grid (Neumann).
Dense laplacian_matrix(int nx, int ny)
{
    const int n = nx * ny;
    Dense d = Dense::Zero(2 * n, n);
    for (int iy = 0; iy < ny; ++iy) {
        for (int ix = 0; ix < nx; ++ix) {
            const int i = iy * nx + ix;
            if (ix + 1 < nx) { d(i, i) = -1; d(i, i + 1) = 1; }
            if (iy + 1 < ny) { d(n + i, i) = -1; d(n + i, i + nx) = 1; }
        }
    }
    return d.transpose() * d;
}

class IllConditioned : public ::testing::TestWithParam<CgnrForm> {};

TEST_P(IllConditioned, ConvergesToTheDoublePrecisionLeastSquaresSolution)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    // κ(A) = 100, so CG works on κ(AᵀA) = 1e4.
    auto [csr, a] = ill_conditioned(120, 60, 1e2, rng);
    const StoredMatrix model{std::move(csr)};
    // b with a component outside the range of A: a true least-squares problem.
    const auto x_true = test::random_vector(60, rng);
    const auto noise = test::random_vector(120, rng, -0.01f, 0.01f);
    const auto b = to_float(a * to_vec(x_true) + to_vec(noise));
    const Vec reference = a.colPivHouseholderQr().solve(to_vec(b));

    SolverOptions options;
    options.form = GetParam();
    options.max_iterations = 3000;
    options.tolerance = 1e-7;
    options.residual_replacement = 20;
    FrameResult result;
    const auto x = solve_cgnr(model, Regularizer{}, options, Executor::cpu(), b, {}, &result);
    EXPECT_NE(result.status, SolveStatus::non_finite);
    EXPECT_LE(test::rel_error(x, reference), 1e-4) << "after " << result.iterations << " iterations";
}

TEST_P(IllConditioned, RegularizedSolveMatchesTheNormalEquations)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int nx = 12, ny = 10;
    std::vector<double> angles;
    for (int k = 0; k < 7; ++k) angles.push_back(180.0 * k / 7);  // few views: underdetermined
    const Parallel2d model{nx, ny, 14, angles, 0.3};
    const Dense a = dense_of(model);
    const auto b = test::random_vector(model.rows(), rng, 0.0f, 2.0f);
    const double lambda = 0.05, mu = 0.01;
    const Dense normal = a.transpose() * a + lambda * laplacian_matrix(nx, ny) +
                         mu * Dense::Identity(nx * ny, nx * ny);
    const Vec reference = normal.ldlt().solve(a.transpose() * to_vec(b));

    SolverOptions options;
    options.form = GetParam();
    options.max_iterations = 2000;
    options.tolerance = 1e-6;
    FrameResult result;
    const auto reg = Regularizer::parse("laplacian:0.05,tikhonov:0.01");
    const auto x = solve_cgnr(model, reg, options, Executor::cpu(), b, {}, &result);
    EXPECT_EQ(result.status, SolveStatus::converged);
    EXPECT_LE(test::rel_error(x, reference), 1e-4) << "after " << result.iterations << " iterations";
}

INSTANTIATE_TEST_SUITE_P(BothForms, IllConditioned,
                         ::testing::Values(CgnrForm::fused, CgnrForm::cgls1),
                         [](const auto& info) { return std::string{to_string(info.param)}; });

/// Textbook CGLS (Björck) in double, k iterations from x = 0.
Vec textbook_cgls(const Dense& a, const Vec& b, int iterations)
{
    Vec x = Vec::Zero(a.cols());
    Vec r = b;
    Vec s = a.transpose() * r;
    Vec p = s;
    double gamma = s.squaredNorm();
    for (int k = 0; k < iterations; ++k) {
        const Vec q = a * p;
        const double alpha = gamma / q.squaredNorm();
        x += alpha * p;
        r -= alpha * q;
        s = a.transpose() * r;
        const double gamma_new = s.squaredNorm();
        p = s + (gamma_new / gamma) * p;
        gamma = gamma_new;
    }
    return x;
}

TEST(Cgnr, WithoutRegularizerBothFormsFollowTextbookCgls)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    auto [csr, a] = ill_conditioned(300, 80, 10.0, rng);
    const StoredMatrix model{std::move(csr)};
    const auto b = test::random_vector(model.rows(), rng);
    for (int iterations : {1, 3, 12}) {
        const Vec reference = textbook_cgls(a, to_vec(b), iterations);
        for (CgnrForm form : {CgnrForm::fused, CgnrForm::cgls1}) {
            SolverOptions options;
            options.form = form;
            options.max_iterations = iterations;
            options.residual_replacement = 0;
            const auto x = solve_cgnr(model, Regularizer{}, options, Executor::cpu(), b);
            EXPECT_LE(test::rel_error(x, reference), 1e-5)
                << to_string(form) << ", " << iterations << " iterations";
        }
    }
}

/// Fills a solver's inputs for `batch` frames and solves.
std::vector<float> solve_batch(const SystemModel& model, const Regularizer& reg,
                               const SolverOptions& options, const std::vector<float>& b, int batch,
                               std::vector<FrameResult>* results)
{
    CgnrSolver solver{model, reg, options, Executor::cpu(), batch};
    std::copy(b.begin(), b.end(), solver.input().data);
    std::fill_n(solver.image().data, solver.image().size, 0.0f);
    solver.solve();
    *results = solver.results();
    return {solver.image().data, solver.image().data + solver.image().size};
}

TEST(Cgnr, BatchedFramesEqualSeparateSolves)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model{20, 20, 24, {0, 20, 40, 60, 80, 100, 120, 140, 160}};
    const auto reg = Regularizer::parse("tv:0.05,nonneg:5", 0.01);
    SolverOptions options;
    options.max_iterations = 40;
    options.tolerance = 1e-3;  // frames stop at different iterations
    const int batch = 3;
    const auto b = test::random_vector(model.rows() * batch, rng, 0.0f, 3.0f);
    std::vector<FrameResult> batched;
    const auto xb = solve_batch(model, reg, options, b, batch, &batched);
    const auto m = static_cast<std::size_t>(model.rows());
    const auto n = static_cast<std::size_t>(model.cols());
    for (int f = 0; f < batch; ++f) {
        std::vector<FrameResult> single;
        const std::vector<float> bf(b.begin() + f * m, b.begin() + (f + 1) * m);
        const auto xs = solve_batch(model, reg, options, bf, 1, &single);
        const std::vector<float> xf(xb.begin() + f * n, xb.begin() + (f + 1) * n);
        EXPECT_LE(test::rel_error(xf, xs), 1e-6) << "frame " << f;
        EXPECT_EQ(batched[f].iterations, single[0].iterations) << "frame " << f;
        EXPECT_EQ(batched[f].status, single[0].status) << "frame " << f;
    }
}

TEST(Cgnr, StopsOnToleranceAndWarmStartNeedsFewerIterations)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model{32, 32, 32, {0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165}};
    const auto reg = Regularizer::parse("tikhonov:0.1");
    SolverOptions options;
    options.max_iterations = 500;
    options.tolerance = 1e-4;
    const auto b = test::random_vector(model.rows(), rng, 0.0f, 1.0f);
    FrameResult cold;
    const auto x = solve_cgnr(model, reg, options, Executor::cpu(), b, {}, &cold);
    EXPECT_EQ(cold.status, SolveStatus::converged);
    EXPECT_LE(cold.rel_gradient, 1e-4);
    EXPECT_LT(cold.iterations, 500);
    // The next frame of the same sensor differs a little: start from x.
    auto b2 = b;
    for (auto& v : b2) v *= 1.01f;
    FrameResult warm, cold2;
    solve_cgnr(model, reg, options, Executor::cpu(), b2, x, &warm);
    solve_cgnr(model, reg, options, Executor::cpu(), b2, {}, &cold2);
    EXPECT_EQ(warm.status, SolveStatus::converged);
    EXPECT_LT(warm.iterations, cold2.iterations);
}

/// Every element of `got` equal to `want`'s (+0 and −0 alike), with the
/// first that is not named.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << what << ": element " << i;
    }
}

/// A solve from InitialImage::zero, with image() holding other values, ends
/// where a solve from zeros written into image() does, to the bit: r0 = −b
/// and h0 = −Aᵀb are the values A·0 − b and its adjoint give. Every system
/// model, both forms, with and without terms (F(0, 0) = 0), two frames.
TEST(Cgnr, ZeroStartEqualsASolveFromGivenZeros)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d parallel{24, 20, 29, {0, 25, 50, 75, 100, 125, 150, 175}, 0.3};
    const Synthetic synthetic{400, 120, 3000, seed};
    const StoredMatrix stored{synthetic.materialize()};
    const int batch = 2;
    for (const SystemModel* model : {static_cast<const SystemModel*>(&parallel),
                                     static_cast<const SystemModel*>(&synthetic),
                                     static_cast<const SystemModel*>(&stored)}) {
        const auto b = test::random_vector(static_cast<std::size_t>(model->rows()) * batch, rng,
                                           -1.0f, 2.0f);
        for (const char* terms : {"", "tv:0.05,nonneg:3,tikhonov:0.01"}) {
            for (const CgnrForm form : {CgnrForm::fused, CgnrForm::cgls1}) {
                SCOPED_TRACE(model->kind() + ", terms '" + terms + "', " +
                             to_string(form));
                SolverOptions options;
                options.max_iterations = 30;
                options.form = form;
                options.residual_replacement = 7;
                const auto reg = Regularizer::parse(terms, 0.01);
                CgnrSolver given{*model, reg, options, Executor::cpu(), batch};
                CgnrSolver zero{*model, reg, options, Executor::cpu(), batch};
                std::copy(b.begin(), b.end(), given.input().data);
                std::copy(b.begin(), b.end(), zero.input().data);
                std::fill_n(given.image().data, given.image().size, 0.0f);
                std::fill_n(zero.image().data, zero.image().size, 5.0f);
                given.solve(InitialImage::given);
                zero.solve(InitialImage::zero);
                expect_same_values({zero.image().data, zero.image().data + zero.image().size},
                                   {given.image().data, given.image().data + given.image().size},
                                   "image");
                const auto want = given.results(), got = zero.results();
                for (int f = 0; f < batch; ++f) {
                    EXPECT_EQ(got[f].iterations, want[f].iterations) << "frame " << f;
                    EXPECT_EQ(got[f].status, want[f].status) << "frame " << f;
                    EXPECT_EQ(got[f].rel_gradient, want[f].rel_gradient) << "frame " << f;
                }
            }
        }
    }
}

/// The fused form refreshes h_k = Aᵀ(A x_k − b) after every K recurrence
/// steps, at k = K, 2K, …, before the step. A refresh at k reaches x first
/// in x_{k+2} where a regularizer keeps g apart from h (α_k keeps the
/// recurrence's g_k), and in x_{k+1} without one (g is h). So, against the
/// same solve without refreshes: K iterations (none yet, and none at k = 0)
/// are the same bits; with TV so are K + 1 (the refresh at k = K moves h,
/// not x_{K+1}); and K + 2 are not (it took place).
TEST(Cgnr, ResidualReplacementFallsAfterEveryKSteps)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model{24, 20, 29, {0, 25, 50, 75, 100, 125, 150, 175}, 0.3};
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng, -1.0f, 2.0f);
    constexpr int period = 5;
    auto solve = [&](const Regularizer& reg, int iterations, int replacement) {
        SolverOptions options;
        options.max_iterations = iterations;
        options.residual_replacement = replacement;
        return solve_cgnr(model, reg, options, Executor::cpu(), b);
    };
    for (const char* terms : {"", "tv:0.05"}) {
        SCOPED_TRACE(std::string{"terms '"} + terms + "'");
        const auto reg = Regularizer::parse(terms, 0.01);
        expect_same_values(solve(reg, period, period), solve(reg, period, 0),
                           "K iterations against none refreshed");
        const auto refreshed = solve(reg, period + 2, period);
        const auto plain = solve(reg, period + 2, 0);
        EXPECT_GT(test::rel_error(refreshed, plain), 0.0) << "K + 2 iterations: no refresh took place";
        if (*terms != '\0') {
            expect_same_values(solve(reg, period + 1, period), solve(reg, period + 1, 0),
                               "K + 1 iterations with TV against none refreshed");
        }
    }
}

TEST(Cgnr, MaxIterationsIsExact)
{
    const Synthetic model{300, 100, 2000, 5};
    std::mt19937_64 rng{test::fresh_seed()};
    SolverOptions options;
    options.max_iterations = 17;
    FrameResult result;
    solve_cgnr(model, Regularizer{}, options, Executor::cpu(), test::random_vector(300, rng), {}, &result);
    EXPECT_EQ(result.status, SolveStatus::max_iterations);
    EXPECT_EQ(result.iterations, 17);
}

TEST(Cgnr, NonFiniteMeasurementsStopWithoutNaNImages)
{
    const Synthetic model{300, 100, 2000, 5};
    std::mt19937_64 rng{test::fresh_seed()};
    auto b = test::random_vector(300, rng);
    b[17] = std::numeric_limits<float>::quiet_NaN();
    SolverOptions options;
    options.max_iterations = 10;
    FrameResult result;
    std::vector<float> x0(100, 0.25f);
    const auto x = solve_cgnr(model, Regularizer{}, options, Executor::cpu(), b, x0, &result);
    EXPECT_EQ(result.status, SolveStatus::non_finite);
    EXPECT_EQ(result.iterations, 0);
    for (float v : x) ASSERT_TRUE(std::isfinite(v));
}

TEST(Cgnr, TvSolveReachesAStationaryPointOfTheObjective)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int n = 24;
    std::vector<double> angles;
    for (int k = 0; k < 30; ++k) angles.push_back(6.0 * k);
    const Parallel2d model{n, n, n, angles};
    // A piecewise-constant square, measured with noise.
    std::vector<float> truth(n * n, 0.0f);
    for (int iy = 6; iy < 18; ++iy) for (int ix = 8; ix < 16; ++ix) truth[iy * n + ix] = 1.0f;
    std::vector<float> b(model.rows());
    model.apply(Executor::cpu(), cview_of(truth), view_of(b));
    std::normal_distribution<float> noise{0.0f, 0.2f};
    for (auto& v : b) v += noise(rng);
    const auto reg = Regularizer::parse("tv:0.5", 0.05);
    SolverOptions options;
    options.max_iterations = 300;
    const auto x = solve_cgnr(model, reg, options, Executor::cpu(), b);

    // ∇Φ(x) = Aᵀ(Ax − b) + F(x, x), compared with ∇Φ(0) = −Aᵀb.
    const Executor cpu = Executor::cpu();
    std::vector<float> r(model.rows()), grad(model.cols()), grad0(model.cols()), state(model.cols());
    model.apply(cpu, cview_of(x), view_of(r));
    for (std::size_t i = 0; i < r.size(); ++i) r[i] -= b[i];
    model.apply_adjoint(cpu, cview_of(r), view_of(grad));
    kernels::regularizer_prepare(cpu, reg.terms(), {n, n}, 1, cview_of(x), view_of(state));
    kernels::regularizer_apply_add(cpu, reg.terms(), {n, n}, 1, cview_of(state), cview_of(grad),
                                   cview_of(x), view_of(grad));
    model.apply_adjoint(cpu, cview_of(b), view_of(grad0));
    EXPECT_LT(test::norm(grad), 1e-3 * test::norm(grad0));
    // And TV helps: closer to the truth than the unregularized solution.
    const auto plain = solve_cgnr(model, Regularizer{}, options, cpu, b);
    EXPECT_LT(test::rel_error(x, truth), test::rel_error(plain, truth));
}

struct CountingObserver : SolveObserver {
    int iterations = 0;
    int solves = 0;
    void on_iteration(int, const std::vector<double>& rel) override
    {
        ++iterations;
        EXPECT_EQ(rel.size(), 1u);
    }
    void on_solve(const std::vector<FrameResult>& results, double wall_ms) override
    {
        ++solves;
        EXPECT_EQ(results.size(), 1u);
        EXPECT_GE(wall_ms, 0.0);
    }
};

TEST(Cgnr, ReportsThroughTheObserverHook)
{
    const Synthetic model{300, 100, 2000, 5};
    std::mt19937_64 rng{test::fresh_seed()};
    SolverOptions options;
    options.max_iterations = 12;
    options.status_check_interval = 4;
    CgnrSolver solver{model, Regularizer{}, options, Executor::cpu()};
    CountingObserver observer;
    solver.set_observer(&observer);
    const auto b = test::random_vector(300, rng);
    std::copy(b.begin(), b.end(), solver.input().data);
    std::fill_n(solver.image().data, 100, 0.0f);
    solver.solve();
    EXPECT_EQ(observer.iterations, 3);
    EXPECT_EQ(observer.solves, 1);
}

TEST(SolverOptions, RejectsBadValues)
{
    SolverOptions o;
    o.max_iterations = 0;
    EXPECT_THROW(o.validate(), std::invalid_argument);
    o = {};
    o.tolerance = -1;
    EXPECT_THROW(o.validate(), std::invalid_argument);
    o = {};
    o.residual_replacement = -3;
    EXPECT_THROW(o.validate(), std::invalid_argument);
    EXPECT_THROW(parse_cgnr_form("cgls3"), std::invalid_argument);
    EXPECT_EQ(parse_cgnr_form("cgls1"), CgnrForm::cgls1);
    EXPECT_THROW(parse_solve_launch("warp"), std::invalid_argument);
}

}  // namespace
}  // namespace recon
