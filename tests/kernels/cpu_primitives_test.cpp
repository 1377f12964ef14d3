// The CPU primitives against plain loops, on fresh random inputs with the
// outputs poisoned first, and the CGNR step guards.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cgnr_scalars.hpp"
#include "kernels/primitives.hpp"
#include "kernels/rows.hpp"
#include "test_utils.hpp"

namespace recon::kernels {
namespace {

using test::cview_of;
using test::view_of;

constexpr float poison = std::numeric_limits<float>::quiet_NaN();

/// Dense copy of a system view's rows.
std::vector<double> dense(const SystemView& system)
{
    const index_t m = rows_of(system), n = cols_of(system);
    std::vector<double> a(static_cast<std::size_t>(m) * n, 0.0);
    for (index_t i = 0; i < m; ++i) {
        std::visit([&](const auto& s) {
            for_each_entry(s, i, [&](index_t col, float w) { a[i * n + col] += w; });
        }, system);
    }
    return a;
}

TEST(CpuPrimitives, ApplyAdjointAndNormalMatchDenseLoops)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const SyntheticView system{700, 150, 4321, seed};
    const index_t m = 700, n = 150;
    const int batch = 2;
    const auto a = dense(system);
    const auto x = test::random_vector(n * batch, rng);
    const auto y = test::random_vector(m * batch, rng);
    std::vector<float> ax(m * batch, poison), aty(n * batch, poison), u(n * batch, poison),
        q(m * batch, poison);
    const Executor cpu = Executor::cpu();
    apply(cpu, system, batch, cview_of(x), view_of(ax));
    apply_adjoint(cpu, system, batch, cview_of(y), view_of(aty));
    normal_apply(cpu, system, batch, cview_of(x), view_of(u), view_of(q));
    for (int b = 0; b < batch; ++b) {
        std::vector<double> ref_ax(m, 0.0), ref_aty(n, 0.0), ref_u(n, 0.0);
        for (index_t i = 0; i < m; ++i) {
            for (index_t j = 0; j < n; ++j) {
                ref_ax[i] += a[i * n + j] * x[b * n + j];
                ref_aty[j] += a[i * n + j] * y[b * m + i];
            }
        }
        for (index_t i = 0; i < m; ++i) {
            for (index_t j = 0; j < n; ++j) ref_u[j] += a[i * n + j] * ref_ax[i];
        }
        const std::vector<float> axb(ax.begin() + b * m, ax.begin() + (b + 1) * m);
        const std::vector<float> atyb(aty.begin() + b * n, aty.begin() + (b + 1) * n);
        const std::vector<float> ub(u.begin() + b * n, u.begin() + (b + 1) * n);
        const std::vector<float> qb(q.begin() + b * m, q.begin() + (b + 1) * m);
        EXPECT_LT(test::rel_error(axb, ref_ax), 1e-6);
        EXPECT_LT(test::rel_error(atyb, ref_aty), 1e-6);
        EXPECT_LT(test::rel_error(ub, ref_u), 1e-6);
        EXPECT_LT(test::rel_error(qb, ref_ax), 1e-6);
    }
}

TEST(CpuPrimitives, EmptyRowsAndASingleRow)
{
    // CSR with empty rows 0 and 2.
    const std::vector<size_type> row_ptr{0, 0, 2, 2, 3};
    const std::vector<index_t> cols{1, 3, 0};
    const std::vector<float> vals{2.0f, -1.0f, 4.0f};
    const CsrView csr{4, 4, row_ptr.data(), cols.data(), vals.data()};
    const std::vector<float> x{1, 2, 3, 4};
    std::vector<float> y(4, poison), u(4, poison);
    apply(Executor::cpu(), csr, 1, cview_of(x), view_of(y));
    EXPECT_EQ(y, (std::vector<float>{0, 0, 0, 4}));
    normal_apply(Executor::cpu(), csr, 1, cview_of(x), view_of(u), View<float>{});
    // A x = [0, 0, 0, 4]: Aᵀ(Ax) = 4 * row 3 = [16, 0, 0, 0]
    EXPECT_EQ(u, (std::vector<float>{16, 0, 0, 0}));
    const SyntheticView single{1, 10, 3, 9};
    std::vector<float> one(1, poison), back(10, poison);
    const auto x10 = std::vector<float>(10, 1.0f);
    apply(Executor::cpu(), single, 1, cview_of(x10), view_of(one));
    apply_adjoint(Executor::cpu(), single, 1, cview_of(one), view_of(back));
    EXPECT_TRUE(std::isfinite(one[0]));
    for (float v : back) EXPECT_TRUE(std::isfinite(v));
}

TEST(CpuPrimitives, VectorOps)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto x = test::random_vector(1000, rng), y = test::random_vector(1000, rng);
    std::vector<float> out(1000, poison);
    axpby(Executor::cpu(), 2.0f, cview_of(x), -0.5f, cview_of(y), view_of(out));
    for (int i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(out[i], 2.0f * x[i] - 0.5f * y[i]);
    std::vector<double> dots(4, std::nan(""));
    batched_dot(Executor::cpu(), 4, cview_of(x), cview_of(y), view_of(dots));
    for (int b = 0; b < 4; ++b) {
        double ref = 0;
        for (int i = 0; i < 250; ++i) ref += static_cast<double>(x[b * 250 + i]) * y[b * 250 + i];
        EXPECT_NEAR(dots[b], ref, 1e-9);
    }
    fill(Executor::cpu(), view_of(out), 3.5f);
    for (float v : out) EXPECT_EQ(v, 3.5f);
}

TEST(CgnrSteps, UpdateGuardsBreakdownAndNonFinite)
{
    std::vector<CgnrScalars> s(3);
    s[0].f = -1.0;  // not positive: breakdown
    s[0].gd = -2.0;
    s[1].f = std::numeric_limits<double>::infinity();
    s[1].gd = -1.0;
    s[2].f = 4.0;  // healthy: α = -gd / f = 0.5
    s[2].gd = -2.0;
    std::vector<float> d(6, 1.0f), u(6, 2.0f), x(6, 10.0f), h(6, 20.0f);
    cgnr_step_update(Executor::cpu(), 3, cview_of(d), cview_of(u), view_of(x), view_of(h), view_of(s));
    EXPECT_EQ(s[0].status, SolveStatus::breakdown);
    EXPECT_EQ(s[1].status, SolveStatus::non_finite);
    EXPECT_EQ(s[2].status, SolveStatus::running);
    EXPECT_EQ(x, (std::vector<float>{10, 10, 10, 10, 10.5f, 10.5f}));
    EXPECT_EQ(h, (std::vector<float>{20, 20, 20, 20, 21, 21}));
}

/// The fused form's one-pass step (cgnr_step_update_beta, with F(p, x) from
/// cgnr_step_dots_folded) against the steps it replaces: cgnr_step_update,
/// then g = h + F(p, x_{k+1}) by cgnr_step_beta_folded. Equal up to rounding
/// because every term is linear in its second argument. Frame 1 breaks down
/// (f < 0): nothing of it moves.
TEST(CgnrSteps, UpdateBetaEqualsUpdateThenBeta)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    RegularizerTerms terms;
    terms.count = 4;
    terms.term[0] = {RegularizerKind::tv, 0.3f, 0.05f};
    terms.term[1] = {RegularizerKind::laplacian, 0.2f, 0.0f};
    terms.term[2] = {RegularizerKind::nonneg, 1.5f, 0.0f};
    terms.term[3] = {RegularizerKind::tikhonov, 0.7f, 0.0f};
    const ImageGrid grid{37, 29};
    const int batch = 3;
    const std::size_t n = static_cast<std::size_t>(grid.size()) * batch;
    auto vec = [&] { return test::random_vector(n, rng); };
    const auto p = vec(), u = vec(), d = vec(), x0 = vec(), h0 = vec(), g0 = vec();
    const Executor cpu = Executor::cpu();
    std::vector<float> state(regularizer_state_size(terms, grid, batch));
    regularizer_prepare(cpu, terms, grid, batch, cview_of(p), view_of(state));
    const CgnrParams params{50, 0.0};
    std::vector<CgnrScalars> s0(batch);
    for (auto& v : s0) {
        v.gg0 = 1e3;
        v.iterations = 4;
    }

    // Both paths start with e = u + F(p, d) and f, gᵀd; the new one also
    // takes fx = F(p, x).
    std::vector<float> e(n), fx(n), g_old = g0, g_new = g0;
    std::vector<float> x_old = x0, h_old = h0, x_new = x0, h_new = h0;
    auto s_old = s0, s_new = s0;
    const RegularizerFold fold{terms, grid, cview_of(state), cview_of(u), cview_of(d)};
    cgnr_step_dots_folded(cpu, batch, fold, cview_of(d), cview_of(g0), view_of(e), view_of(s_old));
    cgnr_step_dots_folded(cpu, batch, fold, cview_of(d), cview_of(g0), view_of(e), view_of(s_new),
                          cview_of(x0), view_of(fx));
    std::vector<float> fx_ref(n);
    const std::vector<float> zeros(n, 0.0f);
    regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), cview_of(zeros), cview_of(x0),
                          view_of(fx_ref));
    EXPECT_EQ(fx, fx_ref);
    s_old[0].f = s_new[0].f = std::abs(s_new[0].f) + 0.1;  // frame 0 takes a step
    s_old[1].f = s_new[1].f = -1.0;

    cgnr_step_update(cpu, batch, cview_of(d), cview_of(u), view_of(x_old), view_of(h_old),
                     view_of(s_old));
    cgnr_step_beta_folded(cpu, params, batch,
                          {terms, grid, cview_of(state), cview_of(h_old), cview_of(x_old)},
                          cview_of(e), view_of(g_old), view_of(s_old));
    cgnr_step_update_beta(cpu, params, batch, cview_of(d), cview_of(u), cview_of(e), cview_of(fx),
                          view_of(x_new), view_of(h_new), view_of(g_new), view_of(s_new));

    EXPECT_EQ(x_new, x_old);
    EXPECT_EQ(h_new, h_old);
    double scale = 0;
    for (float v : g_old) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (std::size_t i = 0; i < n; ++i) {
        const bool stopped = i / grid.size() == 1;
        if (stopped) {
            ASSERT_EQ(g_new[i], g0[i]) << "frame 1 broke down: its g stays";
        } else {
            ASSERT_NEAR(g_new[i], g_old[i], 1e-5 * scale) << "element " << i;
        }
    }
    for (int b = 0; b < batch; ++b) {
        SCOPED_TRACE("frame " + std::to_string(b));
        EXPECT_EQ(s_new[b].status, s_old[b].status);
        EXPECT_EQ(s_new[b].iterations, s_old[b].iterations);
        EXPECT_DOUBLE_EQ(s_new[b].alpha, s_old[b].alpha);
        EXPECT_NEAR(s_new[b].gg, s_old[b].gg, 1e-5 * s_old[b].gg);
        // gᵀe cancels (random signs): its error scales with ‖g‖ ‖e‖, not with it.
        const auto pixels = static_cast<std::size_t>(grid.size());
        double ee = 0;
        for (std::size_t i = b * pixels; i < (b + 1) * pixels; ++i) ee += e[i] * e[i];
        EXPECT_NEAR(s_new[b].beta, s_old[b].beta,
                    1e-5 * std::sqrt(s_old[b].gg * ee) / std::abs(s_old[b].f));
    }
    EXPECT_EQ(s_new[1].status, SolveStatus::breakdown);
    EXPECT_EQ(s_new[0].iterations, 5);

    // Without a regularizer g is h_{k+1} (the same buffer) and e is u: the
    // same values as cgnr_step_update then cgnr_step_beta, bit for bit.
    x_old = x0, h_old = h0, x_new = x0, h_new = h0;
    for (auto& v : s0) {
        v.f = 2.5;
        v.gd = -1.5;
    }
    s0[1].f = -1.0;
    s_old = s0, s_new = s0;
    cgnr_step_update(cpu, batch, cview_of(d), cview_of(u), view_of(x_old), view_of(h_old),
                     view_of(s_old));
    cgnr_step_beta(cpu, params, batch, cview_of(h_old), cview_of(u), view_of(s_old));
    cgnr_step_update_beta(cpu, params, batch, cview_of(d), cview_of(u), cview_of(u), {},
                          view_of(x_new), view_of(h_new), view_of(h_new), view_of(s_new));
    EXPECT_EQ(x_new, x_old);
    EXPECT_EQ(h_new, h_old);
    for (int b = 0; b < batch; ++b) {
        EXPECT_EQ(s_new[b].status, s_old[b].status);
        EXPECT_DOUBLE_EQ(s_new[b].gg, s_old[b].gg);
        EXPECT_DOUBLE_EQ(s_new[b].beta, s_old[b].beta);
    }
}

TEST(CgnrSteps, CombinedCallsEqualTheirStepsOnTheCpu)
{
    // cgnr_step_normal_dots and cgnr_step_update_direction are single calls
    // for the GPU's sake; on the CPU they are the steps one after the other,
    // bit for bit. normal_dots takes u as the fold's base (the base it is
    // given is not read: here it is NaN).
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const ImageGrid grid{23, 17};
    const int batch = 2;
    const SyntheticView system{900, static_cast<index_t>(grid.size()), 4000, seed};
    RegularizerTerms terms;
    terms.count = 2;
    terms.term[0] = {RegularizerKind::tv, 0.3f, 0.05f};
    terms.term[1] = {RegularizerKind::nonneg, 1.5f, 0.0f};
    const std::size_t n = static_cast<std::size_t>(grid.size()) * batch;
    auto vec = [&] { return test::random_vector(n, rng); };
    const auto p = vec(), d = vec(), x = vec(), g = vec(), h = vec();
    const Executor cpu = Executor::cpu();
    std::vector<float> state(regularizer_state_size(terms, grid, batch));
    regularizer_prepare(cpu, terms, grid, batch, cview_of(p), view_of(state));
    std::vector<CgnrScalars> s0(batch);
    for (auto& v : s0) {
        v.gg0 = 1e3;
        v.iterations = 4;
    }
    const std::vector<float> nan_base(n, poison);

    std::vector<float> u1(n, poison), e1(n, poison), fx1(n, poison);
    auto s1 = s0;
    cgnr_step_normal_dots(cpu, system, batch, cview_of(d), view_of(u1), {},
                          {terms, grid, cview_of(state), cview_of(nan_base), cview_of(d)},
                          cview_of(g), view_of(e1), view_of(s1), cview_of(x), view_of(fx1));
    std::vector<float> u2(n, poison), e2(n, poison), fx2(n, poison);
    auto s2 = s0;
    normal_apply(cpu, system, batch, cview_of(d), view_of(u2), {});
    cgnr_step_dots_folded(cpu, batch, {terms, grid, cview_of(state), cview_of(u2), cview_of(d)},
                          cview_of(d), cview_of(g), view_of(e2), view_of(s2), cview_of(x),
                          view_of(fx2));
    EXPECT_EQ(u1, u2);
    EXPECT_EQ(e1, e2);
    EXPECT_EQ(fx1, fx2);
    for (int b = 0; b < batch; ++b) {
        EXPECT_EQ(s1[b].f, s2[b].f);
        EXPECT_EQ(s1[b].gd, s2[b].gd);
    }

    // Frame 0 steps, frame 1 breaks down.
    s1[0].f = s2[0].f = std::abs(s1[0].f) + 0.1;
    s1[1].f = s2[1].f = -1.0;
    const CgnrParams params{50, 0.0};
    std::vector<float> d1 = d, x1 = x, h1 = h, g1 = g, st1(state.size(), poison);
    std::vector<float> d2 = d, x2 = x, h2 = h, g2 = g, st2(state.size(), poison);
    cgnr_step_update_direction(cpu, system, params, batch, view_of(d1), cview_of(u1),
                               cview_of(e1), cview_of(fx1), view_of(x1), view_of(h1),
                               view_of(g1), {}, view_of(s1),
                               {terms, grid, cview_of(x1), view_of(st1)});
    cgnr_step_update_beta(cpu, params, batch, cview_of(d2), cview_of(u2), cview_of(e2),
                          cview_of(fx2), view_of(x2), view_of(h2), view_of(g2), view_of(s2));
    cgnr_step_direction_folded(cpu, batch, cview_of(g2), view_of(d2), view_of(s2),
                               {terms, grid, cview_of(x2), view_of(st2)});
    EXPECT_EQ(d1, d2);
    EXPECT_EQ(x1, x2);
    EXPECT_EQ(h1, h2);
    EXPECT_EQ(g1, g2);
    EXPECT_EQ(st1, st2);
    for (int b = 0; b < batch; ++b) {
        EXPECT_EQ(s1[b].status, s2[b].status);
        EXPECT_EQ(s1[b].beta, s2[b].beta);
    }
    EXPECT_EQ(s1[1].status, SolveStatus::breakdown);
}

/// The combined calls' CPU tests' inputs: two frames of a synthetic system
/// on a 19 x 21 grid, a TV term, random images (p for the state F reads)
/// and scalars of an iteration's start; frame 1 has stopped.
struct TwoFrameStep {
    explicit TwoFrameStep(std::uint64_t seed)
        : rng{seed}, system{700, static_cast<index_t>(grid.size()), 3000, seed}
    {
        tv.count = 1;
        tv.term[0] = {RegularizerKind::tv, 0.3f, 0.05f};
        for (auto* v : {&p, &d, &x, &g, &h}) *v = test::random_vector(n, rng);
        for (auto& v : s0) {
            v.gg0 = 1e3;
            v.iterations = 4;
        }
        s0[1].status = SolveStatus::converged;
    }
    /// The state of p for `terms` (one element where there is none).
    std::vector<float> state(const RegularizerTerms& terms) const
    {
        std::vector<float> st(std::max<size_type>(1, regularizer_state_size(terms, grid, batch)));
        if (terms.count > 0) {
            regularizer_prepare(Executor::cpu(), terms, grid, batch, cview_of(p), view_of(st));
        }
        return st;
    }

    std::mt19937_64 rng;
    ImageGrid grid{19, 21};
    int batch = 2;
    SyntheticView system;
    RegularizerTerms tv;
    std::size_t n = static_cast<std::size_t>(grid.size()) * batch;
    std::vector<float> p, d, x, g, h;
    CgnrParams params{50, 0.0};
    std::vector<CgnrScalars> s0 = std::vector<CgnrScalars>(2);
};

/// A TwoFrameStep's scalars after one call and after its steps: the same
/// bits; frame 0 has taken its step, frame 1 stays stopped.
void expect_same_step_scalars(const std::vector<CgnrScalars>& one,
                              const std::vector<CgnrScalars>& two)
{
    ASSERT_EQ(one.size(), two.size());
    for (std::size_t b = 0; b < one.size(); ++b) {
        SCOPED_TRACE("frame " + std::to_string(b));
        EXPECT_EQ(one[b].status, two[b].status);
        EXPECT_EQ(one[b].f, two[b].f);
        EXPECT_EQ(one[b].alpha, two[b].alpha);
        EXPECT_EQ(one[b].gg, two[b].gg);
        EXPECT_EQ(one[b].beta, two[b].beta);
        EXPECT_EQ(one[b].iterations, two[b].iterations);
    }
    EXPECT_EQ(one[0].iterations, 5);
    EXPECT_EQ(one[1].status, SolveStatus::converged);
}

TEST(CgnrSteps, OnePassEqualsTheDotStepThenTheStepOnTheCpu)
{
    // cgnr_step_one_pass is one call for the GPU's sake; on the CPU it is
    // cgnr_step_normal_dots and then cgnr_step_update_direction, bit for
    // bit, with the state read by F and made for the next iteration in one
    // buffer, as the solver passes it. With and without a regularizer
    // (without: e is u, g is h).
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    TwoFrameStep setup{seed};
    const auto& [rng, grid, batch, system, tv, n, p, d, x, g, h, params, s0] = setup;
    const Executor cpu = Executor::cpu();
    for (const bool regularized : {true, false}) {
        SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
        const RegularizerTerms terms = regularized ? tv : RegularizerTerms{};
        const std::vector<float> state0 = setup.state(terms);
        struct Run {
            std::vector<float> d, x, h, g, u, e, fx, state;
            std::vector<CgnrScalars> s;
        };
        const std::vector<float> nan(n, poison);
        Run one{d, x, h, g, nan, nan, nan, state0, s0}, two = one;
        auto views = [&](Run& r) {
            return std::pair{regularized ? view_of(r.e) : view_of(r.u),
                             regularized ? view_of(r.g) : view_of(r.h)};
        };
        {
            const auto [e, gv] = views(one);
            cgnr_step_one_pass(cpu, system, params, batch, view_of(one.d), view_of(one.u),
                               {terms, grid, cview_of(one.state), cview_of(nan), cview_of(one.d)},
                               e, regularized ? view_of(one.fx) : View<float>{}, view_of(one.x),
                               view_of(one.h), gv, {}, view_of(one.s),
                               {terms, grid, cview_of(one.x), view_of(one.state)});
        }
        {
            const auto [e, gv] = views(two);
            const View<float> fx = regularized ? view_of(two.fx) : View<float>{};
            cgnr_step_normal_dots(cpu, system, batch, cview_of(two.d), view_of(two.u), {},
                                  {terms, grid, cview_of(two.state), cview_of(nan), cview_of(two.d)},
                                  View<const float>{gv.data, gv.size}, e, view_of(two.s),
                                  cview_of(two.x), fx);
            cgnr_step_update_direction(cpu, system, params, batch, view_of(two.d),
                                       cview_of(two.u), View<const float>{e.data, e.size},
                                       View<const float>{fx.data, fx.size}, view_of(two.x),
                                       view_of(two.h), gv, {}, view_of(two.s),
                                       {terms, grid, cview_of(two.x), view_of(two.state)});
        }
        EXPECT_EQ(one.u, two.u);
        EXPECT_EQ(one.d, two.d);
        EXPECT_EQ(one.x, two.x);
        EXPECT_EQ(one.h, two.h);
        if (regularized) {
            EXPECT_EQ(one.e, two.e);
            EXPECT_EQ(one.fx, two.fx);
            EXPECT_EQ(one.g, two.g);
            EXPECT_EQ(one.state, two.state);
        }
        expect_same_step_scalars(one.s, two.s);
    }
}

TEST(CgnrSteps, ReplacementEqualsItsStepsOnTheCpu)
{
    // cgnr_step_replacement is one call for the GPU's sake; on the CPU it is
    // residual (r = A x_k − b), apply_adjoint (h_k = Aᵀ r, the recurrence's
    // h_k replaced), cgnr_step_normal_dots and cgnr_step_update_direction,
    // bit for bit, with the state read by F and made for the next iteration
    // in one buffer, as the solver passes it. With and without a regularizer
    // (without: e is u, g is h). h starts far from Aᵀ(A x − b), so a step
    // from the old h would not pass.
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    TwoFrameStep setup{seed};
    auto& [rng, grid, batch, system, tv, n, p, d, x, g, h, params, s0] = setup;
    const std::size_t m = 700 * static_cast<std::size_t>(batch);
    const auto b = test::random_vector(m, rng);
    const Executor cpu = Executor::cpu();
    for (const bool regularized : {true, false}) {
        SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
        const RegularizerTerms terms = regularized ? tv : RegularizerTerms{};
        const std::vector<float> state0 = setup.state(terms);
        struct Run {
            std::vector<float> d, x, h, g, u, e, fx, r, state;
            std::vector<CgnrScalars> s;
        };
        const std::vector<float> nan(n, poison);
        Run one{d, x, h, g, nan, nan, nan, std::vector<float>(m, poison), state0, s0}, two = one;
        auto e_of = [&](Run& r) { return regularized ? view_of(r.e) : view_of(r.u); };
        auto g_of = [&](Run& r) { return regularized ? view_of(r.g) : view_of(r.h); };
        auto fx_of = [&](Run& r) { return regularized ? view_of(r.fx) : View<float>{}; };
        auto fold = [&](Run& r) {
            return RegularizerFold{terms, grid, cview_of(r.state), cview_of(nan), cview_of(r.d)};
        };
        auto prepare = [&](Run& r) {
            return RegularizerPrepare{terms, grid, cview_of(r.x), view_of(r.state)};
        };
        cgnr_step_replacement(cpu, system, params, batch, view_of(one.d), view_of(one.u),
                              fold(one), e_of(one), fx_of(one), view_of(one.x), cview_of(b),
                              view_of(one.r), view_of(one.h), g_of(one), {}, view_of(one.s),
                              prepare(one));
        const auto in = [](View<float> v) { return View<const float>{v.data, v.size}; };
        residual(cpu, system, batch, cview_of(two.x), cview_of(b), view_of(two.r));
        apply_adjoint(cpu, system, batch, cview_of(two.r), view_of(two.h));
        cgnr_step_normal_dots(cpu, system, batch, cview_of(two.d), view_of(two.u), {}, fold(two),
                              in(g_of(two)), e_of(two), view_of(two.s), cview_of(two.x),
                              fx_of(two));
        cgnr_step_update_direction(cpu, system, params, batch, view_of(two.d), cview_of(two.u),
                                   in(e_of(two)), in(fx_of(two)), view_of(two.x),
                                   view_of(two.h), g_of(two), {}, view_of(two.s), prepare(two));
        EXPECT_EQ(one.u, two.u);
        EXPECT_EQ(one.d, two.d);
        EXPECT_EQ(one.x, two.x);
        EXPECT_EQ(one.r, two.r);
        EXPECT_EQ(one.h, two.h);
        if (regularized) {
            EXPECT_EQ(one.e, two.e);
            EXPECT_EQ(one.fx, two.fx);
            EXPECT_EQ(one.g, two.g);
            EXPECT_EQ(one.state, two.state);
        }
        expect_same_step_scalars(one.s, two.s);
    }
}

TEST(CgnrSteps, TheCpuKeepsNoCopyOfTheDirection)
{
    // The CPU's products read d itself: no cache, and one offered is a
    // clear error rather than memory left stale.
    const Executor cpu = Executor::cpu();
    const SyntheticView system{50, 40, 200, 3};
    EXPECT_EQ(direction_cache_size(cpu, system, 1), 0);
    std::vector<float> d(40, 1.0f), cache(8, 0.0f);
    std::vector<CgnrScalars> s(1);
    auto expect_refused = [](auto&& call) {
        try {
            call();
            FAIL() << "a direction cache was taken on the CPU";
        } catch (const std::invalid_argument& e) {
            EXPECT_STREQ(e.what(), "the CPU keeps no direction cache");
        }
    };
    expect_refused([&] { direction_cache_fill(cpu, system, 1, cview_of(d), view_of(cache)); });
    expect_refused([&] {
        cgnr_step_direction_cached(cpu, system, 1, cview_of(d), view_of(d), view_of(cache),
                                   view_of(s), RegularizerPrepare{});
    });
}

TEST(CgnrSteps, BetaAppliesTheStopTestsInOrder)
{
    CgnrParams params{5, 0.1};
    std::vector<CgnrScalars> s(3);
    for (auto& v : s) {
        v.f = 2.0;
        v.gg0 = 100.0;
        v.iterations = 1;
    }
    s[2].iterations = 4;
    // frame 0: ‖g‖² = 0.5 ≤ 0.01 * 100 → converged; frame 1: NaN; frame 2: hits max.
    std::vector<float> g{0.5f, 0.5f, NAN, 1.0f, 3.0f, 3.0f};
    std::vector<float> e{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    cgnr_step_beta(Executor::cpu(), params, 3, cview_of(g), cview_of(e), view_of(s));
    EXPECT_EQ(s[0].status, SolveStatus::converged);
    EXPECT_DOUBLE_EQ(s[0].beta, 0.5);  // gᵀe / f = 1 / 2
    EXPECT_EQ(s[1].status, SolveStatus::non_finite);
    EXPECT_EQ(s[2].status, SolveStatus::max_iterations);
    EXPECT_EQ(s[2].iterations, 5);
    // Stopped frames are left alone by later steps.
    std::vector<float> d(6, 7.0f);
    cgnr_step_direction(Executor::cpu(), 3, cview_of(g), view_of(d), view_of(s));
    EXPECT_EQ(d, std::vector<float>(6, 7.0f));
}

// The persistent kernel's one-reduction step takes β from sums over h and u
// before the step; it must agree with the sums over the stored new vector.
TEST(CgnrSteps, ExpandedEndMatchesTheSumsOverTheNewGradient)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng{seed};
    const CgnrParams params{100, 0.0};
    for (int trial = 0; trial < 20; ++trial) {
        const std::vector<float> h = test::random_vector(3000, rng);
        const std::vector<float> u = test::random_vector(3000, rng);
        // α as CG takes it: g_{k+1} = h + α u nearly orthogonal to u, so
        // β keeps a fraction of the terms (the cancellation the guard sees).
        const float step = static_cast<float>(-test::dot(h, u) / test::dot(u, u) *
                                              std::uniform_real_distribution<double>{0.3, 0.9}(rng));
        std::vector<float> g(h.size());
        for (std::size_t i = 0; i < h.size(); ++i) g[i] = h[i] + step * u[i];
        CgnrScalars expanded;
        expanded.f = 3.0;
        expanded.gg0 = 1e6;
        CgnrScalars direct = expanded;
        ASSERT_TRUE(cgnr_scalars_end_expanded(expanded, params, step, test::dot(h, u),
                                              test::dot(u, u), test::dot(h, h)));
        cgnr_scalars_end(direct, params, test::dot(g, u), test::dot(g, g));
        EXPECT_NEAR(expanded.gg, direct.gg, 1e-5 * direct.gg);
        // direct sums over g rounded to float: each g_i is off by up to
        // 2^-23 (|h_i| + |step u_i|), independently, which moves gᵀu by a
        // random walk of those times u_i, however small gᵀu itself is
        // (random h and u can make hᵀu, and so gᵀu, nearly cancel). Eight
        // times its size.
        double walk = 0;
        for (std::size_t i = 0; i < h.size(); ++i) {
            const double t = (std::abs(h[i]) + std::abs(step * u[i])) * u[i];
            walk += t * t;
        }
        const double rounding = 8 * std::ldexp(std::sqrt(walk), -23) / expanded.f;
        EXPECT_NEAR(expanded.beta, direct.beta, 1e-4 * std::abs(direct.beta) + rounding);
        EXPECT_EQ(expanded.iterations, 1);
        EXPECT_EQ(expanded.status, SolveStatus::running);
    }
}

TEST(CgnrSteps, ExpandedEndDeclinesWhenItsSumsCancel)
{
    const CgnrParams params{100, 0.0};
    CgnrScalars s;
    s.f = 2.0;
    s.gg0 = 1.0;
    const CgnrScalars before = s;
    // u = −h / α: the new gradient vanishes, ‖g‖² keeps nothing of hᵀh.
    EXPECT_FALSE(cgnr_scalars_end_expanded(s, params, 0.5, -2.0, 4.0, 1.0));
    // ‖g‖² kept, but gᵀe = hᵀu + α uᵀu cancels: −1 + 0.5 · 2 = 0.
    EXPECT_FALSE(cgnr_scalars_end_expanded(s, params, 0.5, -1.0, 2.0, 4.0));
    EXPECT_FALSE(cgnr_scalars_end_expanded(s, params, 0.5, NAN, 2.0, 4.0));
    EXPECT_FALSE(cgnr_scalars_end_expanded(s, params, 0.5, -1.0, 2.0, INFINITY));
    EXPECT_EQ(s.iterations, before.iterations);
    EXPECT_EQ(s.beta, before.beta);
    EXPECT_EQ(s.status, SolveStatus::running);
    // Kept: gᵀe = −1 + 0.5 · 4 = 1, ‖g‖² = 4 − 1 + 1 = 4, β = 1 / 2.
    EXPECT_TRUE(cgnr_scalars_end_expanded(s, params, 0.5, -1.0, 4.0, 4.0));
    EXPECT_DOUBLE_EQ(s.ge, 1.0);
    EXPECT_DOUBLE_EQ(s.gg, 4.0);
    EXPECT_DOUBLE_EQ(s.beta, 0.5);
    EXPECT_EQ(s.iterations, 1);
}

TEST(CgnrSteps, InitStatuses)
{
    std::vector<CgnrScalars> s(3);
    std::vector<float> g{1.0f, 2.0f, 0.0f, 0.0f, INFINITY, 1.0f};
    std::vector<float> d(6, poison);
    cgnr_init(Executor::cpu(), CgnrParams{10, 0.0}, 3, cview_of(g), View<const float>{}, view_of(d),
              view_of(s));
    EXPECT_EQ(s[0].status, SolveStatus::running);
    EXPECT_DOUBLE_EQ(s[0].gg0, 5.0);
    EXPECT_EQ(s[1].status, SolveStatus::converged);
    EXPECT_EQ(s[2].status, SolveStatus::non_finite);
    EXPECT_EQ(d[0], -1.0f);
    EXPECT_EQ(d[1], -2.0f);
}

}  // namespace
}  // namespace recon::kernels
