// Every CUDA primitive against the CPU reference (kernels/cpu), on fresh
// random inputs larger than a block, with outputs poisoned first; edge cases:
// empty rows, a single row, sizes that are not multiples of the block size,
// batches that split into 4 + 1 frame chunks, images too large for the
// shared-memory accumulator.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "cuda_test_support.hpp"
#include "kernels/baselines.hpp"
#include "kernels/primitives.hpp"
#include "recon/system_model.hpp"

namespace recon {
namespace {

using test::expect_close;

using kernels::Array;
using kernels::SolveStatus;
using kernels::Executor;
using test::cview;
using test::cview_of;
using test::gpu;
using test::poisoned;
using test::upload;
using test::view_of;

/// A random CSR matrix; every 7th row empty.
CsrMatrix random_csr(index_t rows, index_t cols, int max_row, std::mt19937_64& rng)
{
    CsrMatrix a;
    a.rows = rows;
    a.cols = cols;
    a.row_ptr.push_back(0);
    std::uniform_int_distribution<int> len_dist{1, max_row};
    std::uniform_real_distribution<float> value{-1.0f, 1.0f};
    for (index_t i = 0; i < rows; ++i) {
        if (i % 7 != 3) {
            const int len = std::min<int>(len_dist(rng), cols);
            std::vector<index_t> picked;
            std::uniform_int_distribution<index_t> col{0, cols - 1};
            while (static_cast<int>(picked.size()) < len) {
                const index_t c = col(rng);
                if (std::find(picked.begin(), picked.end(), c) == picked.end()) picked.push_back(c);
            }
            std::sort(picked.begin(), picked.end());
            for (index_t c : picked) {
                a.col_idx.push_back(c);
                a.values.push_back(value(rng));
            }
        }
        a.row_ptr.push_back(static_cast<size_type>(a.values.size()));
    }
    return a;
}

/// Σ_j |a_ij| v_j for each row i (transposed: Σ_i |a_ij| v_i for each
/// column j), for `batch` frames of v: the magnitude of the terms a
/// product's sum adds, which its rounding scales with.
std::vector<double> magnitudes(const CsrMatrix& a, const std::vector<double>& v, int batch,
                               bool transposed)
{
    const index_t in = transposed ? a.rows : a.cols, out = transposed ? a.cols : a.rows;
    std::vector<double> result(static_cast<std::size_t>(out) * batch, 0.0);
    for (int b = 0; b < batch; ++b) {
        const double* vb = v.data() + static_cast<std::size_t>(b) * in;
        double* rb = result.data() + static_cast<std::size_t>(b) * out;
        for (index_t i = 0; i < a.rows; ++i) {
            for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
                const double w = std::abs(static_cast<double>(a.values[k]));
                if (transposed) {
                    rb[a.col_idx[k]] += w * vb[i];
                } else {
                    rb[i] += w * vb[a.col_idx[k]];
                }
            }
        }
    }
    return result;
}

std::vector<double> absolute(const std::vector<float>& v)
{
    std::vector<double> a(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) a[i] = std::abs(static_cast<double>(v[i]));
    return a;
}

/// Every element written, and within `tol` of `want` relative to the
/// magnitude of the terms that made it (`scale`): a sum that cancels is
/// compared with the size of what cancelled, not with its small result.
void expect_close_to_terms(const std::vector<float>& got, const std::vector<float>& want,
                           const std::vector<double>& scale, double tol, const std::string& what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    ASSERT_EQ(scale.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " not written";
        ASSERT_LE(std::abs(static_cast<double>(got[i]) - want[i]), tol * scale[i])
            << what << ": element " << i << " of " << got.size() << ", got " << got[i]
            << ", want " << want[i] << ", terms of magnitude " << scale[i];
    }
}

struct ModelCase {
    std::string name;
    std::function<std::unique_ptr<SystemModel>(std::uint64_t seed)> make;
};

std::vector<ModelCase> model_cases()
{
    return {
        {"csr", [](std::uint64_t s) {
             std::mt19937_64 rng{s};
             return std::make_unique<StoredMatrix>(random_csr(1333, 301, 9, rng), MatrixLayout::csr);
         }},
        {"sliced_ell", [](std::uint64_t s) {
             std::mt19937_64 rng{s};
             return std::make_unique<StoredMatrix>(random_csr(1333, 301, 40, rng),
                                                   MatrixLayout::sliced_ell);
         }},
        {"single_row", [](std::uint64_t s) {
             std::mt19937_64 rng{s};
             return std::make_unique<StoredMatrix>(random_csr(1, 1029, 300, rng),
                                                   MatrixLayout::sliced_ell);
         }},
        {"synthetic", [](std::uint64_t s) {
             return std::make_unique<Synthetic>(2111, 307, 11311, s);
         }},
        {"synthetic_wide", [](std::uint64_t s) {
             // 30,000 columns: an image too large for the shared accumulator.
             return std::make_unique<Synthetic>(1500, 30000, 9000, s);
         }},
        {"parallel2d", [](std::uint64_t s) {
             std::vector<double> angles;
             for (int k = 0; k < 13; ++k) angles.push_back(180.0 * k / 13 + (s % 5));
             return std::make_unique<Parallel2d>(21, 17, 25, angles, 0.3);
         }},
    };
}

struct PrimitiveCase {
    std::size_t model;
    int batch;
};

class SystemPrimitives : public ::testing::TestWithParam<PrimitiveCase> {};

TEST_P(SystemPrimitives, MatchTheCpuReference)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const ModelCase mc = model_cases()[GetParam().model];
    SCOPED_TRACE(mc.name);
    const int batch = GetParam().batch;
    const auto model = mc.make(seed);
    const index_t m = model->rows(), n = model->cols();
    const Executor cpu = Executor::cpu();
    const auto cpu_view = model->view(cpu);
    const auto gpu_view = model->view(gpu());

    const auto x = test::random_vector(static_cast<std::size_t>(n) * batch, rng);
    const auto y = test::random_vector(static_cast<std::size_t>(m) * batch, rng);
    std::vector<float> ax(static_cast<std::size_t>(m) * batch), aty(static_cast<std::size_t>(n) * batch),
        u(aty.size()), q(ax.size());
    kernels::apply(cpu, cpu_view, batch, cview_of(x), view_of(ax));
    kernels::apply_adjoint(cpu, cpu_view, batch, cview_of(y), view_of(aty));
    kernels::normal_apply(cpu, cpu_view, batch, cview_of(x), view_of(u), view_of(q));
    std::vector<float> r(ax.size());
    kernels::residual(cpu, cpu_view, batch, cview_of(x), cview_of(y), view_of(r));

    const auto dx = upload(x), dy = upload(y);
    auto g_ax = poisoned(ax.size()), g_aty = poisoned(aty.size()), g_u = poisoned(u.size()),
         g_q = poisoned(q.size()), g_u2 = poisoned(u.size());
    kernels::apply(gpu(), gpu_view, batch, cview(dx), g_ax.view());
    kernels::apply_adjoint(gpu(), gpu_view, batch, cview(dy), g_aty.view());
    kernels::normal_apply(gpu(), gpu_view, batch, cview(dx), g_u.view(), g_q.view());
    kernels::normal_apply(gpu(), gpu_view, batch, cview(dx), g_u2.view(), kernels::View<float>{});
    auto g_r = poisoned(r.size());
    kernels::residual(gpu(), gpu_view, batch, cview(dx), cview(dy), g_r.view());
    // Each result against the CPU's, relative to the magnitude of its terms
    // (|A| |x|, |A|ᵀ |y|, |A|ᵀ |A| |x|): a single row's sum of ~150 terms
    // of both signs can cancel to far below its terms (1 run in ~100).
    const CsrMatrix dense = model->materialize();
    const auto ax_terms = magnitudes(dense, absolute(x), batch, false);
    const auto aty_terms = magnitudes(dense, absolute(y), batch, true);
    const auto u_terms = magnitudes(dense, ax_terms, batch, true);
    std::vector<double> r_terms = ax_terms;
    for (std::size_t i = 0; i < r_terms.size(); ++i) r_terms[i] += std::abs(y[i]);
    expect_close_to_terms(g_r.to_host(), r, r_terms, 5e-6, "r = A x - b");
    expect_close_to_terms(g_ax.to_host(), ax, ax_terms, 1e-5, "A x");
    expect_close_to_terms(g_aty.to_host(), aty, aty_terms, 1e-5, "Aᵀ y");
    expect_close_to_terms(g_u.to_host(), u, u_terms, 2e-5, "Aᵀ(A d)");
    expect_close_to_terms(g_q.to_host(), q, ax_terms, 1e-5, "q = A d");
    expect_close_to_terms(g_u2.to_host(), u, u_terms, 2e-5, "Aᵀ(A d) without q");

    // The other accumulations compute the same products.
    if (mc.name != "parallel2d") {
        auto g_glob = poisoned(aty.size());
        kernels::apply_adjoint_accumulating(gpu(), gpu_view, batch, cview(dy), g_glob.view(),
                                            kernels::Accumulation::global_atomics);
        expect_close_to_terms(g_glob.to_host(), aty, aty_terms, 1e-5, "Aᵀ y, global atomics");
    }
    if (batch == 1 && mc.name != "parallel2d" && mc.name != "synthetic_wide") {
        auto g_sx = poisoned(ax.size());
        kernels::apply_shared_x(gpu(), gpu_view, cview(dx), g_sx.view());
        expect_close_to_terms(g_sx.to_host(), ax, ax_terms, 1e-5, "A x, x in shared memory");
    }

    // Adjoint identity on the GPU alone: ⟨A x, y⟩ = ⟨x, Aᵀ y⟩ per frame.
    const auto gax = g_ax.to_host(), gaty = g_aty.to_host();
    for (int b = 0; b < batch; ++b) {
        double lhs = 0, rhs = 0, scale = 0;
        for (index_t i = 0; i < m; ++i) {
            lhs += static_cast<double>(gax[b * m + i]) * y[b * m + i];
            scale += std::abs(static_cast<double>(gax[b * m + i]) * y[b * m + i]);
        }
        for (index_t j = 0; j < n; ++j) {
            rhs += static_cast<double>(x[b * n + j]) * gaty[b * n + j];
            scale += std::abs(static_cast<double>(x[b * n + j]) * gaty[b * n + j]);
        }
        // relative to the sums of magnitudes: a single row's sums can cancel
        EXPECT_LE(std::abs(lhs - rhs), 1e-5 * std::max(scale, 1e-30)) << "frame " << b;
    }
}

std::vector<PrimitiveCase> primitive_cases()
{
    std::vector<PrimitiveCase> cases;
    for (std::size_t mi = 0; mi < model_cases().size(); ++mi) {
        for (int batch : {1, 5, 21}) {
            if (model_cases()[mi].name == "synthetic_wide" && batch > 5) continue;
            cases.push_back({mi, batch});
        }
    }
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, SystemPrimitives, ::testing::ValuesIn(primitive_cases()),
                         [](const auto& info) {
                             return model_cases()[info.param.model].name + "_batch" +
                                    std::to_string(info.param.batch);
                         });

// Rows made on the fly carry the same weights on the GPU as on the CPU:
// rows.hpp rounds each product and sum on its own on both (mul_rn, add_rn).
// A e_j has one term per row, so it is column j of A on both, bit for bit,
// through the generic row kernels (synthetic) and the parallel-beam kernels.
TEST(OnTheFlyRows, GpuColumnsAreTheCpuWeightsBitForBit)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::vector<double> angles;
    for (int k = 0; k < 45; ++k) angles.push_back(4.0 * k + 0.37);
    const Synthetic synthetic{2111, 307, 11311, seed};
    const Parallel2d parallel{64, 48, 70, angles, 0.3};
    // Views along the axes and the diagonals, the detector centred: at 0°
    // every ray crosses whole pixels (p an integer), where one weight of a
    // step is 1 and the other 0.
    const Parallel2d aligned{32, 32, 32, {0.0, 45.0, 90.0, 135.0}, 0.0};
    for (const SystemModel* model : {static_cast<const SystemModel*>(&synthetic),
                                     static_cast<const SystemModel*>(&parallel),
                                     static_cast<const SystemModel*>(&aligned)}) {
        const index_t m = model->rows(), n = model->cols();
        SCOPED_TRACE(::testing::Message() << model->kind() << ", " << m << " x " << n);
        const auto cpu_view = model->view(Executor::cpu());
        const auto gpu_view = model->view(gpu());
        std::uniform_int_distribution<index_t> pick{0, n - 1};
        int nonzero_columns = 0;
        for (int trial = 0; trial < 8; ++trial) {
            const index_t j = pick(rng);
            std::vector<float> x(static_cast<std::size_t>(n), 0.0f);
            x[static_cast<std::size_t>(j)] = 1.0f;
            std::vector<float> column(static_cast<std::size_t>(m));
            kernels::apply(Executor::cpu(), cpu_view, 1, cview_of(x), view_of(column));
            const auto dx = upload(x);
            auto g_column = poisoned(column.size());
            kernels::apply(gpu(), gpu_view, 1, cview(dx), g_column.view());
            const auto got = g_column.to_host();
            for (index_t i = 0; i < m; ++i) {
                ASSERT_EQ(got[static_cast<std::size_t>(i)], column[static_cast<std::size_t>(i)])
                    << "row " << i << ", column " << j;
            }
            nonzero_columns += test::norm(column) > 0.0 ? 1 : 0;
            if (model == &aligned) {  // a whole-pixel crossing of step length 1
                EXPECT_NE(std::find(column.begin(), column.end(), 1.0f), column.end())
                    << "column " << j;
            }
        }
        EXPECT_GT(nonzero_columns, 0);  // not zeros against zeros
    }
}

TEST(CudaVectorPrimitives, AxpbyFillAndBatchedDot)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int batch = 3;
    const std::size_t len = 100003;  // not a multiple of any block size
    const auto x = test::random_vector(len * batch, rng), y = test::random_vector(len * batch, rng);
    const auto dx = upload(x), dy = upload(y);
    auto out = poisoned(x.size());
    kernels::axpby(gpu(), 0.75f, cview(dx), -1.25f, cview(dy), out.view());
    std::vector<float> ref(x.size());
    kernels::axpby(Executor::cpu(), 0.75f, cview_of(x), -1.25f, cview_of(y), view_of(ref));
    expect_close(out.to_host(), ref, 1e-7, "axpby");

    kernels::Array<double> dots{gpu(), batch};
    kernels::batched_dot(gpu(), batch, cview(dx), cview(dy), dots.view());
    std::vector<double> ref_dots(batch);
    kernels::batched_dot(Executor::cpu(), batch, cview_of(x), cview_of(y), view_of(ref_dots));
    const auto got = dots.to_host();
    for (int b = 0; b < batch; ++b) EXPECT_NEAR(got[b], ref_dots[b], 1e-9 * len) << "frame " << b;

    kernels::fill(gpu(), out.view(), 2.5f);
    for (float v : out.to_host()) ASSERT_EQ(v, 2.5f);
}

TEST(CudaRegularizerPrimitives, PrepareAndApplyAddMatchTheCpu)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    kernels::RegularizerTerms terms;
    terms.count = 5;
    terms.term[0] = {kernels::RegularizerKind::tv, 0.3f, 0.05f};
    terms.term[1] = {kernels::RegularizerKind::laplacian, 0.2f, 0.0f};
    terms.term[2] = {kernels::RegularizerKind::nonneg, 1.5f, 0.0f};
    terms.term[3] = {kernels::RegularizerKind::tikhonov, 0.1f, 0.0f};
    terms.term[4] = {kernels::RegularizerKind::nonpos, 0.7f, 0.0f};
    const kernels::ImageGrid grid{37, 29};
    const int batch = 3;
    const std::size_t n = static_cast<std::size_t>(grid.size()) * batch;
    const auto p = test::random_vector(n, rng), v = test::random_vector(n, rng),
               base = test::random_vector(n, rng);
    const auto state_size = kernels::regularizer_state_size(terms, grid, batch);
    std::vector<float> state(state_size), out(n);
    const Executor cpu = Executor::cpu();
    kernels::regularizer_prepare(cpu, terms, grid, batch, cview_of(p), view_of(state));
    kernels::regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), cview_of(base),
                                   cview_of(v), view_of(out));

    const auto dp = upload(p), dv = upload(v), dbase = upload(base);
    auto dstate = poisoned(state.size()), dout = poisoned(n);
    kernels::regularizer_prepare(gpu(), terms, grid, batch, cview(dp), dstate.view());
    kernels::regularizer_apply_add(gpu(), terms, grid, batch, cview(dstate), cview(dbase),
                                   cview(dv), dout.view());
    expect_close(dstate.to_host(), state, 1e-6, "state");
    expect_close(dout.to_host(), out, 1e-6, "base + F(p, v)");
}

/// Scalars of three frames: running, already converged, running.
std::vector<kernels::CgnrScalars> mixed_scalars(std::mt19937_64& rng)
{
    std::uniform_real_distribution<double> dist{0.5, 2.0};
    std::vector<kernels::CgnrScalars> s(3);
    for (auto& x : s) {
        x.gd = -dist(rng);
        x.f = dist(rng);
        x.gg0 = 10 * dist(rng);
        x.gg = dist(rng);
        x.alpha = dist(rng);
        x.beta = dist(rng);
        x.iterations = 4;
    }
    s[1].status = SolveStatus::converged;
    return s;
}

void expect_scalars_equal(const std::vector<kernels::CgnrScalars>& got,
                          const std::vector<kernels::CgnrScalars>& want, const std::string& what)
{
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t b = 0; b < got.size(); ++b) {
        SCOPED_TRACE(what + ", frame " + std::to_string(b));
        EXPECT_EQ(got[b].status, want[b].status);
        EXPECT_EQ(got[b].iterations, want[b].iterations);
        for (auto [g, w] : {std::pair{got[b].gd, want[b].gd}, {got[b].f, want[b].f},
                            {got[b].ge, want[b].ge}, {got[b].gg, want[b].gg},
                            {got[b].gg0, want[b].gg0}, {got[b].alpha, want[b].alpha},
                            {got[b].beta, want[b].beta}}) {
            EXPECT_NEAR(g, w, 1e-9 * std::max(1.0, std::abs(w)));
        }
    }
}

TEST(CudaCgnrSteps, EveryStepMatchesTheCpuOnMixedFrames)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int batch = 3;
    const std::size_t n = 5003, m = 7001;
    const Executor cpu = Executor::cpu();
    kernels::CgnrParams params{5, 0.1};
    auto host = [&](std::size_t len) { return test::random_vector(len * batch, rng); };
    auto g = host(n), d = host(n), e = host(n), u = host(n), x = host(n), h = host(n),
         q = host(m), r = host(m);
    auto dg = upload(g), dd = upload(d), de = upload(e), du = upload(u), dx = upload(x),
         dh = upload(h), dq = upload(q), dr = upload(r);
    auto scalars = mixed_scalars(rng);
    kernels::Array<kernels::CgnrScalars> ds{gpu(), scalars};

    // step_dots, step_update (frame 2 breaks down: f < 0), update_residual,
    // step_beta, step_direction, then init.
    kernels::cgnr_step_dots(cpu, batch, cview_of(d), cview_of(e), cview_of(g), view_of(scalars));
    kernels::cgnr_step_dots(gpu(), batch, cview(dd), cview(de), cview(dg), ds.view());
    expect_scalars_equal(ds.to_host(), scalars, "step_dots");

    scalars[0].f = std::abs(scalars[0].f) + 0.1;  // a step frame 0 can take
    scalars[2].f = -1.0;
    ds = kernels::Array<kernels::CgnrScalars>{gpu(), scalars};
    kernels::cgnr_step_update(cpu, batch, cview_of(d), cview_of(u), view_of(x), view_of(h),
                              view_of(scalars));
    kernels::cgnr_step_update(gpu(), batch, cview(dd), cview(du), dx.view(), dh.view(), ds.view());
    expect_scalars_equal(ds.to_host(), scalars, "step_update");
    expect_close(dx.to_host(), x, 1e-6, "x");
    expect_close(dh.to_host(), h, 1e-6, "h");
    EXPECT_EQ(scalars[2].status, SolveStatus::breakdown);

    scalars[2].status = SolveStatus::running;
    ds = kernels::Array<kernels::CgnrScalars>{gpu(), scalars};
    kernels::cgnr_update_residual(cpu, batch, cview_of(q), view_of(r), view_of(scalars));
    kernels::cgnr_update_residual(gpu(), batch, cview(dq), dr.view(), ds.view());
    expect_close(dr.to_host(), r, 1e-6, "r");

    kernels::cgnr_step_beta(cpu, params, batch, cview_of(g), cview_of(e), view_of(scalars));
    kernels::cgnr_step_beta(gpu(), params, batch, cview(dg), cview(de), ds.view());
    expect_scalars_equal(ds.to_host(), scalars, "step_beta");
    EXPECT_EQ(scalars[0].status, SolveStatus::max_iterations);  // iterations 4 -> 5

    scalars = mixed_scalars(rng);
    ds = kernels::Array<kernels::CgnrScalars>{gpu(), scalars};
    kernels::cgnr_step_direction(cpu, batch, cview_of(g), view_of(d), view_of(scalars));
    kernels::cgnr_step_direction(gpu(), batch, cview(dg), dd.view(), ds.view());
    expect_close(dd.to_host(), d, 1e-6, "d");

    auto d0 = poisoned(d.size());
    kernels::cgnr_init(cpu, params, batch, cview_of(g), cview_of(e), view_of(d), view_of(scalars));
    kernels::cgnr_init(gpu(), params, batch, cview(dg), cview(de), d0.view(), ds.view());
    expect_close(d0.to_host(), d, 0.0, "d0 = -g0");
    expect_scalars_equal(ds.to_host(), scalars, "init");
}

/// Three frames of a 71 x 53 image (3,763 pixels: several blocks, not a
/// multiple) with TV, a second term and a sign constraint, and the state of
/// a random image p: the set-up of the regularized step tests.
struct RegularizedFrames {
    kernels::RegularizerTerms terms;
    kernels::ImageGrid grid;
    int batch = 3;
    std::vector<float> state;

    RegularizedFrames(kernels::RegularizerKind second, std::mt19937_64& rng,
                      kernels::ImageGrid image_grid = {71, 53})
        : grid{image_grid}
    {
        terms.count = 3;
        terms.term[0] = {kernels::RegularizerKind::tv, 0.3f, 0.05f};
        terms.term[1] = {second, 0.2f, 0.0f};
        terms.term[2] = {kernels::RegularizerKind::nonneg, 1.5f, 0.0f};
        state.resize(kernels::regularizer_state_size(terms, grid, batch));
        kernels::regularizer_prepare(Executor::cpu(), terms, grid, batch, cview_of(image(rng)),
                                     view_of(state));
    }
    std::size_t size() const { return static_cast<std::size_t>(grid.size()) * batch; }
    std::vector<float> image(std::mt19937_64& rng) const { return test::random_vector(size(), rng); }
};

TEST(CudaCgnrSteps, FoldedStepsMatchTheRegularizerFollowedByTheStep)
{
    // The regularized solver's steps that compute e = u + F(p, d) and
    // g = h + F(p, x) in the pass of their dot products, and the direction
    // step that computes the next state in its pass: e and g against the
    // CPU's regularizer_apply_add, the scalars against the CPU's plain step
    // on the e and g the GPU wrote (so that only the order of the sums
    // differs). Frame 1 has stopped: its scalars stay as they are.
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const RegularizedFrames frames{kernels::RegularizerKind::laplacian, rng};
    const auto& [terms, grid, batch, state] = frames;
    const std::size_t n = frames.size();
    auto host = [&] { return frames.image(rng); };
    const auto u = host(), d = host(), x = host(), h = host(), g = host();
    const Executor cpu = Executor::cpu();
    const auto dstate = upload(state), du = upload(u), dd = upload(d), dx = upload(x),
               dh = upload(h), dg = upload(g);
    const kernels::CgnrParams params{50, 1e-12};
    auto scalars = mixed_scalars(rng);
    kernels::Array<kernels::CgnrScalars> ds{gpu(), scalars};

    std::vector<float> e(n);
    kernels::regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), cview_of(u),
                                   cview_of(d), view_of(e));
    auto de = poisoned(n);
    kernels::cgnr_step_dots_folded(gpu(), batch, {terms, grid, cview(dstate), cview(du), cview(dd)},
                                   cview(dd), cview(dg), de.view(), ds.view());
    const auto e_gpu = de.to_host();
    expect_close(e_gpu, e, 1e-6, "e = u + F(p, d)");
    kernels::cgnr_step_dots(cpu, batch, cview_of(d), cview_of(e_gpu), cview_of(g), view_of(scalars));
    expect_scalars_equal(ds.to_host(), scalars, "step_dots_folded");

    std::vector<float> g_next(n);
    kernels::regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), cview_of(h),
                                   cview_of(x), view_of(g_next));
    auto dg_next = poisoned(n);
    kernels::cgnr_step_beta_folded(gpu(), params, batch, {terms, grid, cview(dstate), cview(dh), cview(dx)},
                                   cview(de), dg_next.view(), ds.view());
    const auto g_gpu = dg_next.to_host();
    expect_close(g_gpu, g_next, 1e-6, "g = h + F(p, x)");
    kernels::cgnr_step_beta(cpu, params, batch, cview_of(g_gpu), cview_of(e_gpu), view_of(scalars));
    expect_scalars_equal(ds.to_host(), scalars, "step_beta_folded");
    EXPECT_EQ(scalars[1].status, SolveStatus::converged);  // untouched
    EXPECT_EQ(scalars[0].iterations, 5);

    // d = −g + β d of the running frames and the state of every frame from x,
    // against the CPU's direction step and regularizer_prepare.
    std::vector<float> d_next = d, state_next(state.size());
    kernels::cgnr_step_direction(cpu, batch, cview_of(g_gpu), view_of(d_next), view_of(scalars));
    kernels::regularizer_prepare(cpu, terms, grid, batch, cview_of(x), view_of(state_next));
    auto dd_next = upload(d);
    auto dstate_next = poisoned(state.size());
    kernels::cgnr_step_direction_folded(gpu(), batch, cview(dg_next), dd_next.view(), ds.view(),
                                        {terms, grid, cview(dx), dstate_next.view()});
    expect_close(dd_next.to_host(), d_next, 1e-6, "d = -g + beta d");
    expect_close(dstate_next.to_host(), state_next, 1e-6, "state from x");
    const auto d_stopped = dd_next.to_host();
    for (std::size_t i = grid.size(); i < 2 * static_cast<std::size_t>(grid.size()); ++i) {
        ASSERT_EQ(d_stopped[i], d[i]) << "frame 1 has stopped: its d stays";
    }
}

TEST(CudaCgnrSteps, OnePassUpdateAndBetaMatchTheCpu)
{
    // The fused form's one-pass step between residual replacements:
    // cgnr_step_dots_folded with F(p, x), then cgnr_step_update_beta, on the
    // GPU against the CPU's same steps (x and h within rounding, g within
    // the order of its three terms, the scalars within the order of the
    // sums). Frame 1 has stopped, frame 2 breaks down (f < 0). Then the same
    // without a regularizer, g and h one buffer.
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const RegularizedFrames frames{kernels::RegularizerKind::tikhonov, rng};
    const auto& [terms, grid, batch, state] = frames;
    const std::size_t n = frames.size();
    auto host = [&] { return frames.image(rng); };
    const auto u = host(), d = host(), g0 = host();
    auto x = host(), h = host();
    const Executor cpu = Executor::cpu();
    const kernels::CgnrParams params{50, 0.0};
    auto scalars = mixed_scalars(rng);
    const auto scalars_before = scalars;
    kernels::Array<kernels::CgnrScalars> ds{gpu(), scalars};
    const auto dstate = upload(state), du = upload(u), dd = upload(d), dg0 = upload(g0);
    auto dx = upload(x), dh = upload(h);

    std::vector<float> e(n), fx(n);
    auto de = poisoned(n), dfx = poisoned(n);
    kernels::cgnr_step_dots_folded(cpu, batch, {terms, grid, cview_of(state), cview_of(u), cview_of(d)},
                                   cview_of(d), cview_of(g0), view_of(e), view_of(scalars),
                                   cview_of(x), view_of(fx));
    kernels::cgnr_step_dots_folded(gpu(), batch, {terms, grid, cview(dstate), cview(du), cview(dd)},
                                   cview(dd), cview(dg0), de.view(), ds.view(), cview(dx),
                                   dfx.view());
    const auto e_gpu = de.to_host();
    expect_close(e_gpu, e, 1e-6, "e = u + F(p, d)");
    expect_close(dfx.to_host(), fx, 1e-6, "fx = F(p, x)");
    auto dots = scalars_before;  // the CPU's sums over the GPU's e: only their order differs
    kernels::cgnr_step_dots(cpu, batch, cview_of(d), cview_of(e_gpu), cview_of(g0), view_of(dots));
    expect_scalars_equal(ds.to_host(), dots, "step_dots_folded");

    // From here both sides start from the same scalars, e and fx (the CPU's);
    // frame 0 takes a step, frame 2 breaks down (f < 0).
    scalars[0].f = std::abs(scalars[0].f) + 0.1;
    scalars[2].f = -1.0;
    ds = kernels::Array<kernels::CgnrScalars>{gpu(), scalars};
    std::vector<float> g = g0;
    auto dg = upload(g0);
    const auto dfx_cpu = upload(fx), de_cpu = upload(e);  // the same inputs on both sides
    kernels::cgnr_step_update_beta(cpu, params, batch, cview_of(d), cview_of(u), cview_of(e),
                                   cview_of(fx), view_of(x), view_of(h), view_of(g),
                                   view_of(scalars));
    kernels::cgnr_step_update_beta(gpu(), params, batch, cview(dd), cview(du), cview(de_cpu),
                                   cview(dfx_cpu), dx.view(), dh.view(), dg.view(), ds.view());
    expect_close(dx.to_host(), x, 1e-6, "x");
    expect_close(dh.to_host(), h, 1e-6, "h");
    expect_close(dg.to_host(), g, 1e-6, "g = h + fx + alpha e");
    // gᵀe cancels (random signs): its error scales with ‖g‖ ‖e‖, not with it.
    const auto beta_tolerance = [&](const std::vector<float>& ev, const kernels::CgnrScalars& sc,
                                    int b) {
        const auto pixels = static_cast<std::size_t>(grid.size());
        double ee = 0;
        for (std::size_t i = b * pixels; i < (b + 1) * pixels; ++i) ee += ev[i] * ev[i];
        return 1e-5 * std::sqrt(sc.gg * ee) / std::abs(sc.f);
    };
    const auto got = ds.to_host();
    for (int b = 0; b < batch; ++b) {
        SCOPED_TRACE("frame " + std::to_string(b));
        EXPECT_EQ(got[b].status, scalars[b].status);
        EXPECT_EQ(got[b].iterations, scalars[b].iterations);
        EXPECT_NEAR(got[b].alpha, scalars[b].alpha, 1e-12 * std::abs(scalars[b].alpha));
        EXPECT_NEAR(got[b].gg, scalars[b].gg, 1e-6 * scalars[b].gg);
        EXPECT_NEAR(got[b].beta, scalars[b].beta, beta_tolerance(e, scalars[b], b));
    }
    EXPECT_EQ(scalars[0].status, SolveStatus::running);
    EXPECT_EQ(scalars[0].iterations, 5);
    EXPECT_EQ(scalars[1].status, SolveStatus::converged);  // untouched
    EXPECT_EQ(scalars[2].status, SolveStatus::breakdown);

    // Without a regularizer: e is u, g is h.
    scalars = mixed_scalars(rng);
    ds = kernels::Array<kernels::CgnrScalars>{gpu(), scalars};
    x = host();
    h = host();
    dx = upload(x);
    dh = upload(h);
    kernels::cgnr_step_update_beta(cpu, params, batch, cview_of(d), cview_of(u), cview_of(u), {},
                                   view_of(x), view_of(h), view_of(h), view_of(scalars));
    kernels::cgnr_step_update_beta(gpu(), params, batch, cview(dd), cview(du), cview(du), {},
                                   dx.view(), dh.view(), dh.view(), ds.view());
    expect_close(dx.to_host(), x, 1e-6, "x");
    expect_close(dh.to_host(), h, 1e-6, "h = g");
    const auto got2 = ds.to_host();
    for (int b = 0; b < batch; ++b) {
        EXPECT_EQ(got2[b].status, scalars[b].status);
        EXPECT_NEAR(got2[b].gg, scalars[b].gg, 1e-6 * scalars[b].gg);
        EXPECT_NEAR(got2[b].beta, scalars[b].beta, beta_tolerance(u, scalars[b], b));
    }
}

/// The one-pass step and the direction step in one cooperative launch
/// (cgnr_step_update_direction without a kept copy of d: the flat kernel,
/// for any system), and the same call with RECON_UPDATE_DIRECTION=split,
/// against the two steps called one after the other: x, h, g and the state
/// bit for bit, β within the order of its sums, d within that. Frame 1 has
/// stopped, frame 2 breaks down (f < 0): neither moves. A small image
/// (several blocks per frame, not a multiple of the block) and a large one
/// (several elements per thread); with and without a regularizer.
TEST(CudaCgnrSteps, UpdateAndDirectionInOneLaunchMatchTwoLaunches)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const kernels::CgnrParams params{50, 0.0};
    for (const kernels::ImageGrid image : {kernels::ImageGrid{71, 53}, kernels::ImageGrid{613, 401}}) {
        SCOPED_TRACE(std::to_string(image.nx) + " x " + std::to_string(image.ny));
        const RegularizedFrames frames{kernels::RegularizerKind::tikhonov, rng, image};
        const auto& [terms, grid, batch, state] = frames;
        // Any system: without a kept copy of d the step does not read it.
        const Synthetic synthetic{2 * grid.size(), grid.size(), 4 * grid.size(), seed};
        const auto system = synthetic.view(gpu());
        auto scalars = mixed_scalars(rng);
        scalars[0].f = std::abs(scalars[0].f) + 0.1;
        scalars[2].f = -1.0;
        auto host = [&] { return frames.image(rng); };
        const auto d = host(), u = host(), e = host(), fx = host(), x = host(), h = host(),
                   g = host();
        const auto du = upload(u), de = upload(e), dfx = upload(fx);
        for (const bool regularized : {true, false}) {
            SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
            struct Run {
                Array<float> d, x, h, g, state;
                Array<kernels::CgnrScalars> s;
            };
            auto start = [&] {
                return Run{upload(d), upload(x), upload(h), upload(g), poisoned(state.size()),
                           Array<kernels::CgnrScalars>{gpu(), scalars}};
            };
            auto one = start(), two = start(), split = start();
            // Without a regularizer g is h, as the solver passes it.
            auto g_of = [&](Run& r) { return regularized ? r.g.view() : r.h.view(); };
            const auto fx_view = regularized ? cview(dfx) : kernels::View<const float>{};
            const auto used = regularized ? terms : kernels::RegularizerTerms{};
            auto one_call = [&](Run& r) {
                kernels::cgnr_step_update_direction(
                    gpu(), system, params, batch, r.d.view(), cview(du), cview(de), fx_view,
                    r.x.view(), r.h.view(), g_of(r), {}, r.s.view(),
                    {used, grid, cview(r.x), r.state.view()});
            };
            one_call(one);
            {
                const test::ScopedEnv split_mode{"RECON_UPDATE_DIRECTION", "split"};
                one_call(split);
            }
            kernels::cgnr_step_update_beta(gpu(), params, batch, cview(two.d), cview(du),
                                           cview(de), fx_view, two.x.view(), two.h.view(),
                                           g_of(two), two.s.view());
            const auto g_two = g_of(two);
            kernels::cgnr_step_direction_cached(
                gpu(), system, batch, kernels::View<const float>{g_two.data, g_two.size},
                two.d.view(), {}, two.s.view(), {used, grid, cview(two.x), two.state.view()});
            for (auto* run : {&one, &split}) {
                SCOPED_TRACE(run == &one ? "one launch" : "split");
                EXPECT_EQ(run->x.to_host(), two.x.to_host()) << "x";
                EXPECT_EQ(run->h.to_host(), two.h.to_host()) << "h";
                if (regularized) {
                    EXPECT_EQ(run->g.to_host(), two.g.to_host()) << "g";
                    EXPECT_EQ(run->state.to_host(), two.state.to_host()) << "state";
                }
                const auto s1 = run->s.to_host();
                test::expect_step_scalars_match(s1, two.s.to_host(), e, grid.size());
                EXPECT_EQ(s1[0].status, SolveStatus::running);
                EXPECT_EQ(s1[1].status, SolveStatus::converged);
                EXPECT_EQ(s1[2].status, SolveStatus::breakdown);
                const auto d1 = run->d.to_host();
                expect_close(d1, two.d.to_host(), 1e-6, "d = -g + beta d");
                EXPECT_TRUE(std::equal(d1.begin() + grid.size(), d1.end(), d.begin() + grid.size()))
                    << "the frames that stop keep their d";
            }
        }
    }
}

TEST(CudaCgnrSteps, AnUnknownUpdateDirectionModeIsAClearError)
{
    RECON_REQUIRE_GPU();
    const Synthetic synthetic{40, 30, 100, 3};
    const std::size_t n = 30;
    auto d = poisoned(n), u = poisoned(n), x = poisoned(n), h = poisoned(n);
    Array<kernels::CgnrScalars> s{gpu(), std::vector<kernels::CgnrScalars>(1)};
    const test::ScopedEnv mode{"RECON_UPDATE_DIRECTION", "fused"};
    try {
        kernels::cgnr_step_update_direction(gpu(), synthetic.view(gpu()), {10, 0.0}, 1, d.view(),
                                            cview(u), cview(u), {}, x.view(), h.view(), h.view(),
                                            {}, s.view(), kernels::RegularizerPrepare{});
        FAIL() << "expected an error for RECON_UPDATE_DIRECTION=fused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string{e.what()}.find("RECON_UPDATE_DIRECTION"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string{e.what()}.find("'fused'"), std::string::npos) << e.what();
    }
}

TEST(CudaCgnrSteps, InitFlagsZeroAndNonFiniteGradients)
{
    RECON_REQUIRE_GPU();
    std::vector<float> g(2 * 3000, 0.5f);
    std::fill(g.begin() + 3000, g.end(), 0.0f);
    g[100] = std::numeric_limits<float>::infinity();
    const auto dg = upload(g);
    auto dd = poisoned(g.size());
    kernels::Array<kernels::CgnrScalars> ds{gpu(), 2};
    kernels::cgnr_init(gpu(), kernels::CgnrParams{10, 0.0}, 2, cview(dg), kernels::View<const float>{},
                       dd.view(), ds.view());
    const auto s = ds.to_host();
    EXPECT_EQ(s[0].status, SolveStatus::non_finite);
    EXPECT_EQ(s[1].status, SolveStatus::converged);
}

}  // namespace
}  // namespace recon
