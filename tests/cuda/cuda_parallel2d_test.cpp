// The parallel-beam GPU products (ray-driven A x over staged image lines and
// over pair images, each forced and as `auto` picks them, the pixel-driven
// Aᵀ y over per-tile tables, the fused Aᵀ(A d), the residual, the dot step
// summed in the adjoint's epilogue, the direction step that keeps the pair
// images of d)
// against the CPU backend on fresh random inputs, the adjoint identity on
// the GPU alone, and whole solves that give the same bits each time. Geometries that stress the kernels' shortcuts: non-square
// images, bins != nx, centre offsets (rays that miss the image), angles at
// and next to 0, 45, 90 and 135 degrees (where the stepping axis switches
// and bins are exactly one pixel apart), a single view, more views than one
// staged chunk or than one round of staged-line views, images that are not
// whole tiles, images too wide for 4 frames' staged lines, more bins than
// one block of rays, images whose one-frame adjoint pairs each tile with
// its reflection; batches 1, 4 and 5 (the 4-frame kernels and a 4 + 1
// split).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <ios>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.hpp"
#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"
#include "recon/regularizer.hpp"
#include "recon/system_model.hpp"

namespace recon {
namespace {

using test::expect_close;

using kernels::Executor;
using test::cview;
using test::cview_of;
using test::gpu;
using test::poisoned;
using test::upload;
using test::view_of;

struct Geometry {
    std::string name;
    index_t nx, ny, bins;
    std::vector<double> angles;
    double center_offset;
};

std::vector<double> axis_angles()
{
    return {0.0, 45.0, 90.0, 135.0};
}

std::vector<double> near_axis_angles()
{
    return {0.001, -0.001, 44.999, 45.001, 89.999, 90.001, 134.999, 135.001, 179.999, 180.0};
}

std::vector<double> spread_angles(int count, double first)
{
    std::vector<double> a;
    for (int k = 0; k < count; ++k) a.push_back(first + 180.0 * k / count);
    return a;
}

std::vector<Geometry> geometries()
{
    return {
        {"axis_angles_square", 32, 32, 32, axis_angles(), 0.0},
        {"axis_angles_nonsquare", 37, 23, 29, axis_angles(), 0.3},
        {"near_axis", 41, 26, 51, near_axis_angles(), -1.7},
        {"near_axis_half_pixel", 24, 24, 24, near_axis_angles(), 0.5},
        {"one_view", 19, 35, 27, {30.0}, 0.0},
        {"one_view_at_90", 35, 19, 40, {90.0}, 1.25},
        // 100 views: more than one staged chunk of views for 4 frames (32;
        // one frame stages 192); on 132 SMs the staged lines take 2 rounds
        // of 4 views.
        {"many_views_wide", 70, 45, 61, spread_angles(100, 0.37), 2.5},
        // 300 views: two staged chunks of views for one frame; the staged
        // lines' most rounds (4 of 4 views on 132 SMs), the last cluster's
        // group of views cut short (300 = 18 x 16 + 12).
        {"many_views_narrow", 26, 21, 30, spread_angles(300, 1.3), -0.8},
        {"narrow_detector_offset", 48, 33, 9, spread_angles(23, 3.0), 6.0},
        // Most rays miss the image.
        {"detector_beside_image", 20, 20, 30, spread_angles(17, 11.0), 25.0},
        {"tall_thin", 3, 70, 5, spread_angles(13, -20.0), 0.1},
        // 4 frames' staged lines do not fit shared memory (pair images); one
        // frame's (RECON_PARALLEL2D_RAYS=lines) do.
        {"wide_strip", 400, 20, 30, spread_angles(7, 5.0), 0.5},
        // More bins than one block's threads (pair images).
        {"many_bins", 40, 40, 1100, spread_angles(3, 10.0), 0.0},
        // One frame's adjoint takes mirrored pairs of tiles (nx a multiple
        // of 32, ny of 16, the detector centred): 3 rows of tile pairs, the
        // middle one paired within itself, an odd number of bins.
        {"mirrored_tiles", 64, 48, 71, spread_angles(37, 0.4), 0.0},
    };
}

struct Case {
    std::size_t geometry;
    int batch;
    const char* rays;  // RECON_PARALLEL2D_RAYS
};

/// Sets RECON_PARALLEL2D_RAYS for one test.
struct RaysMode : test::ScopedEnv {
    explicit RaysMode(const char* mode) : ScopedEnv{"RECON_PARALLEL2D_RAYS", mode} {}
};

class Parallel2dGpu : public ::testing::TestWithParam<Case> {};

TEST_P(Parallel2dGpu, MatchesTheCpuAndIsItsAdjoint)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Geometry geo = geometries()[GetParam().geometry];
    SCOPED_TRACE(geo.name);
    const int batch = GetParam().batch;
    const RaysMode rays{GetParam().rays};
    const Parallel2d model{geo.nx, geo.ny, geo.bins, geo.angles, geo.center_offset};
    const index_t m = model.rows(), n = model.cols();
    const Executor cpu = Executor::cpu();
    const auto cpu_view = model.view(cpu);
    const auto gpu_view = model.view(gpu());

    const auto x = test::random_vector(static_cast<std::size_t>(n) * batch, rng);
    const auto y = test::random_vector(static_cast<std::size_t>(m) * batch, rng);
    std::vector<float> ax(static_cast<std::size_t>(m) * batch), aty(static_cast<std::size_t>(n) * batch),
        u(aty.size()), q(ax.size()), r(ax.size());
    kernels::apply(cpu, cpu_view, batch, cview_of(x), view_of(ax));
    kernels::apply_adjoint(cpu, cpu_view, batch, cview_of(y), view_of(aty));
    kernels::normal_apply(cpu, cpu_view, batch, cview_of(x), view_of(u), view_of(q));
    kernels::residual(cpu, cpu_view, batch, cview_of(x), cview_of(y), view_of(r));
    // A geometry whose rays all miss the image would compare zeros with zeros.
    ASSERT_GT(test::norm(ax), 0.0);

    const auto dx = upload(x), dy = upload(y);
    auto g_ax = poisoned(ax.size()), g_aty = poisoned(aty.size()), g_u = poisoned(u.size()),
         g_q = poisoned(q.size()), g_u2 = poisoned(u.size()), g_r = poisoned(r.size());
    kernels::apply(gpu(), gpu_view, batch, cview(dx), g_ax.view());
    kernels::apply_adjoint(gpu(), gpu_view, batch, cview(dy), g_aty.view());
    kernels::normal_apply(gpu(), gpu_view, batch, cview(dx), g_u.view(), g_q.view());
    kernels::normal_apply(gpu(), gpu_view, batch, cview(dx), g_u2.view(), kernels::View<float>{});
    kernels::residual(gpu(), gpu_view, batch, cview(dx), cview(dy), g_r.view());
    expect_close(g_ax.to_host(), ax, 1e-5, "A x");
    expect_close(g_aty.to_host(), aty, 1e-5, "Aᵀ y");
    expect_close(g_q.to_host(), q, 1e-5, "q = A d");
    expect_close(g_u.to_host(), u, 2e-5, "Aᵀ(A d)");
    expect_close(g_u2.to_host(), u, 2e-5, "Aᵀ(A d) without q");
    expect_close(g_r.to_host(), r, 5e-6, "r = A x - b");
    // The rays' constants from the model's table or made by each thread, and
    // the order the blocks are handed out in (the table's, longest first, or
    // centre-out), change no bit of A x.
    auto untabled = std::get<kernels::Parallel2dView>(gpu_view);
    ASSERT_NE(untabled.rays, nullptr);
    untabled.rays = nullptr;
    auto g_ax_untabled = poisoned(ax.size());
    kernels::apply(gpu(), kernels::SystemView{untabled}, batch, cview(dx), g_ax_untabled.view());
    EXPECT_EQ(g_ax_untabled.to_host(), g_ax.to_host()) << "A x without the rays' table";
    auto unordered = untabled;
    ASSERT_NE(unordered.rays_order, nullptr);
    unordered.rays_order = nullptr;
    auto g_ax_unordered = poisoned(ax.size());
    kernels::apply(gpu(), kernels::SystemView{unordered}, batch, cview(dx), g_ax_unordered.view());
    EXPECT_EQ(g_ax_unordered.to_host(), g_ax.to_host()) << "A x without the order's table";
    // The adjoint's constants from the model's table (made on the host) or
    // made by each block: the same bits of Aᵀ y.
    auto viewless = std::get<kernels::Parallel2dView>(gpu_view);
    ASSERT_NE(viewless.adjoint_views, nullptr);
    viewless.adjoint_views = nullptr;
    auto g_aty_viewless = poisoned(aty.size());
    kernels::apply_adjoint(gpu(), kernels::SystemView{viewless}, batch, cview(dy),
                           g_aty_viewless.view());
    EXPECT_EQ(g_aty_viewless.to_host(), g_aty.to_host()) << "Aᵀ y without the adjoint's table";
    // The fused product is the two products, bit for bit: A d as apply makes
    // it (one frame without q: as the rays' parts, added in the same order).
    auto g_atax = poisoned(u.size());
    kernels::apply_adjoint(gpu(), gpu_view, batch, cview(g_ax), g_atax.view());
    const auto atax = g_atax.to_host();
    EXPECT_EQ(g_u2.to_host(), atax) << "Aᵀ(A d) without q, against Aᵀ of the GPU's A d";
    EXPECT_EQ(g_u.to_host(), atax) << "Aᵀ(A d) with q, against Aᵀ of the GPU's A d";

    // ⟨A x, y⟩ = ⟨x, Aᵀ y⟩ per frame, with the GPU's two products.
    const auto gax = g_ax.to_host(), gaty = g_aty.to_host();
    for (int b = 0; b < batch; ++b) {
        double lhs = 0, rhs = 0, scale = 0;
        for (index_t i = 0; i < m; ++i) {
            const double t = static_cast<double>(gax[b * m + i]) * y[b * m + i];
            lhs += t;
            scale += std::abs(t);
        }
        for (index_t j = 0; j < n; ++j) rhs += static_cast<double>(x[b * n + j]) * gaty[b * n + j];
        EXPECT_LE(std::abs(lhs - rhs), 1e-5 * std::max(scale, 1e-30)) << "frame " << b;
    }
}

std::vector<Case> cases()
{
    std::vector<Case> all;
    for (std::size_t g = 0; g < geometries().size(); ++g) {
        for (int batch : {1, 4, 5}) {
            for (const char* rays : {"auto", "lines", "pairs"}) all.push_back({g, batch, rays});
        }
    }
    return all;
}

INSTANTIATE_TEST_SUITE_P(Geometries, Parallel2dGpu, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                             return geometries()[info.param.geometry].name + "_batch" +
                                    std::to_string(info.param.batch) + "_" + info.param.rays;
                         });

/// cgnr_step_normal_dots on the GPU against the CPU's normal_apply followed
/// by the dot step: u within rounding; with a regularizer (TV, a Laplacian,
/// a sign constraint; the state of a random image) e = u + F(p, d) and fx =
/// F(p, x) against the CPU's regularizer sum on the GPU's u, every frame;
/// f and gd against the CPU's sums over the GPU's e (only their order
/// differs). Frame 1 has stopped: its scalars stay. Without a regularizer e
/// is u and e, fx are not written.
void expect_normal_dots_match_the_cpu(const SystemModel& model, kernels::ImageGrid grid,
                                      int batch, std::mt19937_64& rng)
{
    const index_t m = model.rows(), n = model.cols();
    ASSERT_EQ(n, grid.size());
    const Executor cpu = Executor::cpu();
    const auto cpu_view = model.view(cpu);
    const auto gpu_view = model.view(gpu());
    kernels::RegularizerTerms terms;
    terms.count = 3;
    terms.term[0] = {kernels::RegularizerKind::tv, 0.3f, 0.05f};
    terms.term[1] = {kernels::RegularizerKind::laplacian, 0.2f, 0.0f};
    terms.term[2] = {kernels::RegularizerKind::nonneg, 1.5f, 0.0f};
    const std::size_t len = static_cast<std::size_t>(n) * batch;
    auto image = [&] { return test::random_vector(len, rng); };
    const auto p = image(), d = image(), g = image(), x = image();
    std::vector<float> state(kernels::regularizer_state_size(terms, grid, batch));
    kernels::regularizer_prepare(cpu, terms, grid, batch, cview_of(p), view_of(state));
    std::vector<kernels::CgnrScalars> before(static_cast<std::size_t>(batch));
    std::uniform_real_distribution<double> dist{0.5, 2.0};
    for (auto& sc : before) {
        sc.gd = -dist(rng);
        sc.f = dist(rng);
        sc.gg = dist(rng);
        sc.iterations = 4;
    }
    if (batch > 1) before[1].status = SolveStatus::converged;

    std::vector<float> u(len), q(static_cast<std::size_t>(m) * batch);
    kernels::normal_apply(cpu, cpu_view, batch, cview_of(d), view_of(u), view_of(q));
    const auto dstate = upload(state), dd = upload(d), dg = upload(g), dx = upload(x);
    for (const bool regularized : {true, false}) {
        SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
        kernels::Array<kernels::CgnrScalars> ds{gpu(), before};
        auto du = poisoned(len), de = poisoned(len), dfx = poisoned(len);
        const auto used = regularized ? terms : kernels::RegularizerTerms{};
        kernels::cgnr_step_normal_dots(gpu(), gpu_view, batch, cview(dd), du.view(), {},
                                       {used, grid, cview(dstate), {}, cview(dd)}, cview(dg),
                                       de.view(), ds.view(), cview(dx), dfx.view());
        const auto u_gpu = du.to_host();
        expect_close(u_gpu, u, 2e-5, "u = A^T(A d)");
        std::vector<float> e = u_gpu;
        if (regularized) {
            std::vector<float> e_want(len), fx_want(len);
            kernels::regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), cview_of(u_gpu),
                                           cview_of(d), view_of(e_want));
            kernels::regularizer_apply_add(cpu, terms, grid, batch, cview_of(state), {},
                                           cview_of(x), view_of(fx_want));
            e = de.to_host();
            expect_close(e, e_want, 1e-6, "e = u + F(p, d)");
            expect_close(dfx.to_host(), fx_want, 1e-6, "fx = F(p, x)");
        } else {
            const auto untouched = [](const std::vector<float>& v) {
                return std::all_of(v.begin(), v.end(), [](float t) { return std::isnan(t); });
            };
            EXPECT_TRUE(untouched(de.to_host())) << "e is u: not written";
            EXPECT_TRUE(untouched(dfx.to_host())) << "fx is not written";
        }
        auto want = before;
        kernels::cgnr_step_dots(cpu, batch, cview_of(d), cview_of(e), cview_of(g), view_of(want));
        const auto got = ds.to_host();
        for (int b = 0; b < batch; ++b) {
            SCOPED_TRACE("frame " + std::to_string(b));
            EXPECT_EQ(got[b].status, want[b].status);
            EXPECT_NEAR(got[b].f, want[b].f, 1e-9 * std::max(1.0, std::abs(want[b].f)));
            EXPECT_NEAR(got[b].gd, want[b].gd, 1e-9 * std::max(1.0, std::abs(want[b].gd)));
        }
        if (batch > 1) {
            EXPECT_EQ(got[1].f, before[1].f) << "a stopped frame keeps its scalars";
        }
    }
}

class Parallel2dGpuNormalDots : public ::testing::TestWithParam<Case> {};

TEST_P(Parallel2dGpuNormalDots, TheDotStepInTheAdjointsEpilogueMatchesTheCpu)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Geometry geo = geometries()[GetParam().geometry];
    SCOPED_TRACE(geo.name);
    const RaysMode rays{GetParam().rays};
    const Parallel2d model{geo.nx, geo.ny, geo.bins, geo.angles, geo.center_offset};
    expect_normal_dots_match_the_cpu(model, {geo.nx, geo.ny}, GetParam().batch, rng);
}

/// Every geometry with each of `batches`, the rays as `auto` picks them.
std::vector<Case> batch_cases(std::initializer_list<int> batches)
{
    std::vector<Case> all;
    for (std::size_t g = 0; g < geometries().size(); ++g) {
        for (int batch : batches) all.push_back({g, batch, "auto"});
    }
    return all;
}

std::string batch_case_name(const ::testing::TestParamInfo<Case>& info)
{
    return geometries()[info.param.geometry].name + "_batch" + std::to_string(info.param.batch);
}

INSTANTIATE_TEST_SUITE_P(Geometries, Parallel2dGpuNormalDots,
                         ::testing::ValuesIn(batch_cases({1, 4, 5})), batch_case_name);

TEST(Parallel2dGpuNormalDots, OtherSystemsTakeTheProductThenTheStep)
{
    // Rows made on the fly (no epilogue: the product, then the dot step's
    // own pass), 4 + 1 frames.
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const kernels::ImageGrid grid{37, 29};
    const Synthetic model{2000, grid.size(), 11000, seed};
    expect_normal_dots_match_the_cpu(model, grid, 5, rng);
}

/// The direction step that keeps the rays' pair images of d
/// (cgnr_step_direction_cached), two steps in a row, against the plain GPU
/// steps: d and the regularizer state bit for bit, the pair images bit for
/// bit equal to ones made afresh from the new d (so each tile's halo, read
/// from its own old entries, was right), and the normal product from them
/// equal to the one that makes its own. d against the CPU's step within
/// rounding. Frame 1 has stopped: its d and pair images stay.
class Parallel2dGpuDirectionCache : public ::testing::TestWithParam<Case> {};

/// The set-up of the direction-cache tests: a geometry's model and image
/// grid, the batch, TV and a sign constraint, and the sizes of the
/// regularizer state and of the pair images kept.
struct CachedFrames {
    Geometry geo;
    int batch;
    Parallel2d model;
    kernels::ImageGrid grid;
    kernels::SystemView gpu_view;
    std::size_t len;
    kernels::RegularizerTerms terms;
    std::size_t state_size;
    std::size_t cache_size;

    explicit CachedFrames(const Case& c) : CachedFrames{geometries()[c.geometry], c.batch} {}
    CachedFrames(Geometry geometry, int frames)
        : geo{std::move(geometry)},
          batch{frames},
          model{geo.nx, geo.ny, geo.bins, geo.angles, geo.center_offset},
          grid{geo.nx, geo.ny},
          gpu_view{model.view(gpu())},
          len{static_cast<std::size_t>(grid.size()) * batch},
          terms{two_terms()},
          state_size{static_cast<std::size_t>(kernels::regularizer_state_size(terms, grid, batch))},
          cache_size{static_cast<std::size_t>(kernels::direction_cache_size(gpu(), gpu_view, batch))}
    {
    }
    static kernels::RegularizerTerms one_tv_term()
    {
        kernels::RegularizerTerms t;
        t.count = 1;
        t.term[0] = {kernels::RegularizerKind::tv, 0.4f, 0.03f};
        return t;
    }
    static kernels::RegularizerTerms two_terms()
    {
        kernels::RegularizerTerms t;
        t.count = 2;
        t.term[0] = {kernels::RegularizerKind::tv, 0.3f, 0.05f};
        t.term[1] = {kernels::RegularizerKind::nonneg, 1.5f, 0.0f};
        return t;
    }
};

TEST_P(Parallel2dGpuDirectionCache, KeepsThePairImagesOfD)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const CachedFrames frames{GetParam()};
    const auto& [geo, batch, model, grid, gpu_view, len, terms, state_size, cache_size] = frames;
    SCOPED_TRACE(geo.name);
    const Executor cpu = Executor::cpu();
    ASSERT_GT(cache_size, 0U) << "single frames' rays read pair images";
    std::vector<kernels::CgnrScalars> scalars(static_cast<std::size_t>(batch));
    std::uniform_real_distribution<double> beta{0.2, 1.5};
    for (auto& sc : scalars) sc.beta = beta(rng);
    if (batch > 1) scalars[1].status = SolveStatus::converged;
    kernels::Array<kernels::CgnrScalars> ds{gpu(), scalars};

    auto d = test::random_vector(len, rng);
    auto d_cached = upload(d), d_plain = upload(d);
    auto cache = poisoned(static_cast<std::size_t>(cache_size));
    kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(d_cached), cache.view());
    for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        const bool regularized = step == 1;
        const auto g = upload(test::random_vector(len, rng));
        const auto x = upload(test::random_vector(len, rng));
        auto state_cached = poisoned(state_size), state_plain = poisoned(state_size);
        const auto used = regularized ? terms : kernels::RegularizerTerms{};
        kernels::cgnr_step_direction_cached(gpu(), gpu_view, batch, cview(g), d_cached.view(),
                                            cache.view(), ds.view(),
                                            {used, grid, cview(x), state_cached.view()});
        if (regularized) {
            kernels::cgnr_step_direction_folded(gpu(), batch, cview(g), d_plain.view(), ds.view(),
                                                {terms, grid, cview(x), state_plain.view()});
            EXPECT_EQ(state_cached.to_host(), state_plain.to_host()) << "state";
        } else {
            kernels::cgnr_step_direction(gpu(), batch, cview(g), d_plain.view(), ds.view());
        }
        auto want = scalars;
        kernels::cgnr_step_direction(cpu, batch, cview_of(g.to_host()), view_of(d), view_of(want));
        expect_close(d_cached.to_host(), d, 1e-6, "d = -g + beta d, against the CPU");
        ASSERT_EQ(d_cached.to_host(), d_plain.to_host()) << "d, against the plain step";
        auto fresh = poisoned(static_cast<std::size_t>(cache_size));
        kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(d_cached), fresh.view());
        ASSERT_EQ(cache.to_host(), fresh.to_host()) << "pair images, against ones made afresh";
    }

    // The normal product and dot step reading the pair images, against the
    // same making its own.
    const auto g = upload(test::random_vector(len, rng));
    std::vector<std::vector<float>> u;
    for (const bool from_cache : {true, false}) {
        auto du = poisoned(len);
        kernels::Array<kernels::CgnrScalars> scratch{gpu(), scalars};
        kernels::cgnr_step_normal_dots(gpu(), gpu_view, batch, cview(d_cached), du.view(), {},
                                       kernels::RegularizerFold{}, cview(g), {},
                                       scratch.view(), {}, {},
                                       from_cache ? cview(cache) : kernels::View<const float>{});
        u.push_back(du.to_host());
    }
    EXPECT_EQ(u[0], u[1]) << "u from the kept pair images";
}

INSTANTIATE_TEST_SUITE_P(Geometries, Parallel2dGpuDirectionCache,
                         ::testing::ValuesIn(batch_cases({1, 3})), batch_case_name);

/// The one-pass step and the direction step in one cooperative launch
/// (cgnr_step_update_direction with the pair images of d kept), and the same
/// call with RECON_UPDATE_DIRECTION=split, against the two steps called one
/// after the other: x, h, g and the state bit for bit, β and ‖g‖² within
/// the order of the sums, d within that, and the pair images equal to ones
/// made afresh from the new d. With 3 frames, frame 1 has stopped and frame
/// 2 breaks down (f < 0): neither moves.
TEST_P(Parallel2dGpuDirectionCache, UpdateAndDirectionInOneLaunchMatchTwoLaunches)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const CachedFrames frames{GetParam()};
    const auto& [geo, batch, model, grid, gpu_view, len, terms, state_size, cache_size] = frames;
    SCOPED_TRACE(geo.name);
    ASSERT_GT(cache_size, 0U);
    const kernels::CgnrParams params{50, 0.0};
    std::vector<kernels::CgnrScalars> scalars(static_cast<std::size_t>(batch));
    std::uniform_real_distribution<double> dist{0.5, 2.0};
    for (auto& sc : scalars) {
        sc.gd = -dist(rng);
        sc.f = dist(rng);
        sc.gg0 = 10 * dist(rng);
        sc.gg = dist(rng);
        sc.iterations = 4;
    }
    if (batch > 2) {
        scalars[1].status = SolveStatus::converged;
        scalars[2].f = -1.0;
    }
    auto image = [&] { return test::random_vector(len, rng); };
    const auto d = image(), u = image(), e = image(), fx = image(), x = image(), h = image(),
               g = image();
    const auto du = upload(u), de = upload(e), dfx = upload(fx);

    for (const bool regularized : {true, false}) {
        SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
        struct Run {
            kernels::Array<float> d, x, h, g, cache, state;
            kernels::Array<kernels::CgnrScalars> s;
        };
        auto start = [&] {
            Run r{upload(d), upload(x), upload(h), upload(g), poisoned(cache_size),
                  poisoned(state_size), kernels::Array<kernels::CgnrScalars>{gpu(), scalars}};
            kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(r.d), r.cache.view());
            return r;
        };
        auto one = start(), two = start(), split = start();
        // Without a regularizer g is h, as the solver passes it.
        auto g_of = [&](Run& r) { return regularized ? r.g.view() : r.h.view(); };
        const auto fx_view = regularized ? cview(dfx) : kernels::View<const float>{};
        const auto used = regularized ? terms : kernels::RegularizerTerms{};
        auto one_call = [&](Run& r) {
            kernels::cgnr_step_update_direction(
                gpu(), gpu_view, params, batch, r.d.view(), cview(du), cview(de), fx_view,
                r.x.view(), r.h.view(), g_of(r), r.cache.view(), r.s.view(),
                {used, grid, cview(r.x), r.state.view()});
        };
        one_call(one);
        {
            // RECON_UPDATE_DIRECTION=split: the same call takes the two launches.
            const test::ScopedEnv split_mode{"RECON_UPDATE_DIRECTION", "split"};
            one_call(split);
        }
        kernels::cgnr_step_update_beta(gpu(), params, batch, cview(two.d), cview(du), cview(de),
                                       fx_view, two.x.view(), two.h.view(), g_of(two),
                                       two.s.view());
        const auto g_two = g_of(two);
        kernels::cgnr_step_direction_cached(gpu(), gpu_view, batch,
                                            kernels::View<const float>{g_two.data, g_two.size},
                                            two.d.view(), two.cache.view(), two.s.view(),
                                            {used, grid, cview(two.x), two.state.view()});
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
            if (batch > 2) {
                EXPECT_EQ(s1[1].status, SolveStatus::converged);
                EXPECT_EQ(s1[2].status, SolveStatus::breakdown);
            }
            expect_close(run->d.to_host(), two.d.to_host(), 1e-6, "d = -g + beta d");
            auto fresh = poisoned(cache_size);
            kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(run->d), fresh.view());
            EXPECT_EQ(run->cache.to_host(), fresh.to_host())
                << "pair images, against ones made afresh";
        }
    }
}

/// The scalars at an iteration's start (‖g‖² 1 of `gg0`, 4 iterations
/// done): frame 0 `first`; with 3 frames, frame 1 has stopped.
std::vector<kernels::CgnrScalars> start_scalars(int batch, SolveStatus first, double gg0)
{
    std::vector<kernels::CgnrScalars> scalars(static_cast<std::size_t>(batch));
    for (auto& sc : scalars) {
        sc.gg0 = gg0;
        sc.gg = 1.0;
        sc.iterations = 4;
    }
    scalars[0].status = first;
    if (batch > 2) scalars[1].status = SolveStatus::converged;
    return scalars;
}

/// Whether cgnr_step_one_pass takes its one launch on these frames, by
/// the library's rule: one frame whose adjoint takes mirrored tiles (nx a
/// multiple of 32, ny of 16, the detector centred) on a system with its
/// views table (the tests' images leave every block resident at once).
bool expects_one_launch(const CachedFrames& frames)
{
    const auto& v = std::get<kernels::Parallel2dView>(frames.gpu_view);
    return frames.batch == 1 && v.center_offset == 0.0f && v.nx % 32 == 0 && v.ny % 16 == 0 &&
           v.adjoint_views != nullptr;
}

/// The fused form's iteration in one call (cgnr_step_one_pass: for one
/// frame the rays and a cooperative adjoint that runs the whole step after
/// its epilogue), and the same call with RECON_UPDATE_DIRECTION=cooperative
/// (the two calls inside), against cgnr_step_normal_dots followed by
/// cgnr_step_update_direction: u, e and fx bit for bit where the call
/// writes them (the one launch, expects_one_launch, leaves them as they
/// were: the solver's scratch); the scalars within
/// the order of their sums, but for ‖g_{k+1}‖² and β of the one call, which
/// takes them expanded from sums before the step: within the float rounding
/// of the stored g; x, h, g, the state and d within rounding (α and β may
/// round apart in their last bit); the pair images equal to ones made
/// afresh from the new d. The state F reads and the one made for the next
/// iteration are one buffer, as the solver passes them. Frame 0 runs or has
/// stopped (then it keeps x, h, g, d and its scalars); with 3 frames,
/// frame 1 has stopped.
///
/// `cancels` (one frame): h + F(x_k, x_k) and g are ~−2 e plus a 1e-3 part,
/// so the step takes α ≈ 2 and leaves a g_{k+1} whose ‖·‖² expanded from
/// the sums before the step keeps less than 2^-10 of its terms: the one
/// call sums ‖g‖² and gᵀe over the new g instead (after a second grid
/// sync), within the order of the sums of the steps apart.
void expect_one_pass_matches_its_steps(const CachedFrames& frames, std::mt19937_64& rng,
                                       bool cancels = false)
{
    const auto& [geo, batch, model, grid, gpu_view, len, terms, state_size, cache_size] = frames;
    SCOPED_TRACE(geo.name);
    ASSERT_GT(cache_size, 0U);
    const kernels::CgnrParams params{50, 0.0};
    auto image = [&] { return test::random_vector(len, rng); };
    const auto d = image(), x = image(), h = image(), g = image(), p = image();
    std::vector<float> state(state_size);
    kernels::regularizer_prepare(Executor::cpu(), terms, grid, batch, cview_of(p), view_of(state));
    for (const SolveStatus first : {SolveStatus::running, SolveStatus::converged}) {
        SCOPED_TRACE(first == SolveStatus::running ? "frame 0 runs" : "frame 0 has stopped");
        const auto scalars = start_scalars(batch, first, 1e6);
        for (const bool regularized : {true, false}) {
            SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
            struct Run {
                kernels::Array<float> d, x, h, g, u, e, fx, cache, state;
                kernels::Array<kernels::CgnrScalars> s;
            };
            auto start = [&](const std::vector<float>& h0, const std::vector<float>& g0) {
                Run r{upload(d),       upload(x),       upload(h0),
                      upload(g0),      poisoned(len),   poisoned(len),
                      poisoned(len),   poisoned(cache_size), upload(state),
                      kernels::Array<kernels::CgnrScalars>{gpu(), scalars}};
                kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(r.d), r.cache.view());
                return r;
            };
            const auto used = regularized ? terms : kernels::RegularizerTerms{};
            auto [h_in, g_in] = std::pair{h, g};
            if (cancels) {
                // e and fx as the step forms them (bit for bit, below)
                auto probe = start(h, g);
                kernels::cgnr_step_normal_dots(
                    gpu(), gpu_view, batch, cview(probe.d), probe.u.view(), {},
                    kernels::RegularizerFold{used, grid, cview(probe.state), {}, cview(probe.d)},
                    cview(probe.g), regularized ? probe.e.view() : probe.u.view(), probe.s.view(),
                    cview(probe.x), regularized ? probe.fx.view() : kernels::View<float>{},
                    cview(probe.cache));
                const auto e = (regularized ? probe.e : probe.u).to_host();
                const auto fx = regularized ? probe.fx.to_host() : std::vector<float>(len, 0.0f);
                const auto small = image();
                for (std::size_t i = 0; i < len; ++i) {
                    g_in[i] = -2.0f * e[i] + 1e-3f * std::abs(e[i]) * small[i];
                    h_in[i] = g_in[i] - fx[i];
                }
            }
            auto one = start(h_in, g_in), cooperative = start(h_in, g_in), two = start(h_in, g_in);
            // Without a regularizer e is u and g is h, as the solver passes them.
            auto e_of = [&](Run& r) { return regularized ? r.e.view() : r.u.view(); };
            auto g_of = [&](Run& r) { return regularized ? r.g.view() : r.h.view(); };
            auto fx_of = [&](Run& r) { return regularized ? r.fx.view() : kernels::View<float>{}; };
            auto fold_of = [&](Run& r) {
                return kernels::RegularizerFold{used, grid, cview(r.state), {}, cview(r.d)};
            };
            auto prepare_of = [&](Run& r) {
                return kernels::RegularizerPrepare{used, grid, cview(r.x), r.state.view()};
            };
            auto one_call = [&](Run& r) {
                kernels::cgnr_step_one_pass(gpu(), gpu_view, params, batch, r.d.view(), r.u.view(),
                                            fold_of(r), e_of(r), fx_of(r), r.x.view(), r.h.view(),
                                            g_of(r), r.cache.view(), r.s.view(), prepare_of(r));
            };
            one_call(one);
            {
                const test::ScopedEnv apart{"RECON_UPDATE_DIRECTION", "cooperative"};
                one_call(cooperative);
            }
            const auto in = [](kernels::View<float> v) {
                return kernels::View<const float>{v.data, v.size};
            };
            kernels::cgnr_step_normal_dots(gpu(), gpu_view, batch, cview(two.d), two.u.view(), {},
                                           fold_of(two), in(g_of(two)), e_of(two), two.s.view(),
                                           cview(two.x), fx_of(two), cview(two.cache));
            kernels::cgnr_step_update_direction(gpu(), gpu_view, params, batch, two.d.view(),
                                                cview(two.u), in(e_of(two)), in(fx_of(two)),
                                                two.x.view(), two.h.view(), g_of(two),
                                                two.cache.view(), two.s.view(), prepare_of(two));
            const auto s2 = two.s.to_host();
            // Σ |g_{k+1} e_k| of frame b: the expanded gᵀe is that of g before
            // it is rounded to float, within 2^-24 of it per element.
            const auto g_next = (regularized ? two.g : two.h).to_host();
            const auto e_k = (regularized ? two.e : two.u).to_host();
            const auto ge_terms = [&](int b) {
                const std::size_t pixels = static_cast<std::size_t>(grid.size());
                double sum = 0.0;
                for (std::size_t i = b * pixels; i < (b + 1) * pixels; ++i) {
                    sum += std::abs(static_cast<double>(g_next[i]) * e_k[i]);
                }
                return sum;
            };
            for (auto* run : {&one, &cooperative}) {
                SCOPED_TRACE(run == &one ? "one call" : "cooperative step apart");
                // Elsewhere the one call is the two calls, which write u,
                // e and fx.
                const bool launched = run == &one && expects_one_launch(frames);
                std::vector<std::pair<kernels::Array<float>*, kernels::Array<float>*>> products{
                    {&run->u, &two.u}};
                if (regularized) products.insert(products.end(), {{&run->e, &two.e},
                                                                   {&run->fx, &two.fx}});
                for (auto [got, want] : products) {
                    const auto values = got->to_host();
                    if (launched) {
                        EXPECT_TRUE(std::all_of(values.begin(), values.end(),
                                                [](float v) { return std::isnan(v); }))
                            << "u, e or fx stored by the one launch";
                    } else {
                        EXPECT_EQ(values, want->to_host()) << "u, e or fx";
                    }
                }
                if (regularized) {
                    expect_close(run->g.to_host(), two.g.to_host(), 1e-6, "g");
                    expect_close(run->state.to_host(), two.state.to_host(), 1e-6, "state");
                }
                expect_close(run->x.to_host(), two.x.to_host(), 1e-6, "x");
                expect_close(run->h.to_host(), two.h.to_host(), 1e-6, "h");
                expect_close(run->d.to_host(), two.d.to_host(), 1e-6, "d");
                const auto s1 = run->s.to_host();
                for (int b = 0; b < batch; ++b) {
                    SCOPED_TRACE("frame " + std::to_string(b));
                    EXPECT_EQ(s1[b].status, s2[b].status);
                    EXPECT_EQ(s1[b].iterations, s2[b].iterations);
                    EXPECT_NEAR(s1[b].f, s2[b].f, 1e-9 * std::abs(s2[b].f));
                    EXPECT_NEAR(s1[b].gd, s2[b].gd, 1e-9 * std::abs(s2[b].gd));
                    EXPECT_NEAR(s1[b].alpha, s2[b].alpha, 1e-9 * std::abs(s2[b].alpha));
                    const bool expanded = run == &one && !cancels;
                    EXPECT_NEAR(s1[b].gg, s2[b].gg, (expanded ? 1e-6 : 1e-9) * s2[b].gg);
                    const double rounding =
                        expanded ? 1.2e-7 * ge_terms(b) / std::abs(s2[b].f) : 0.0;
                    EXPECT_NEAR(s1[b].beta, s2[b].beta,
                                1e-6 * std::abs(s2[b].beta) + rounding + 1e-12);
                }
                auto fresh = poisoned(cache_size);
                kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(run->d), fresh.view());
                EXPECT_EQ(run->cache.to_host(), fresh.to_host())
                    << "pair images, against ones made afresh";
                if (first != SolveStatus::running) {
                    const auto pixels = static_cast<std::size_t>(grid.size());
                    const auto frame0 = [&](const std::vector<float>& v) {
                        return std::vector<float>(v.begin(), v.begin() + pixels);
                    };
                    EXPECT_EQ(frame0(run->x.to_host()), frame0(x)) << "a stopped frame keeps x";
                    EXPECT_EQ(frame0(run->h.to_host()), frame0(h_in)) << "and h";
                    EXPECT_EQ(frame0(run->d.to_host()), frame0(d)) << "and d";
                    EXPECT_EQ(s1[0].f, scalars[0].f) << "and its scalars";
                    EXPECT_EQ(s1[0].iterations, 4);
                }
            }
            if (first == SolveStatus::running) {
                EXPECT_EQ(s2[0].status, SolveStatus::running);
                EXPECT_EQ(s2[0].iterations, 5);
                if (cancels) {
                    double gg_in = 0.0;
                    for (const float v : g_in) gg_in += static_cast<double>(v) * v;
                    ASSERT_LT(s2[0].gg, gg_in / 1024.0)
                        << "the test's premise: the expansion would cancel";
                }
            }
        }
    }
}

TEST_P(Parallel2dGpuDirectionCache, OnePassMatchesTheDotStepThenTheStep)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    expect_one_pass_matches_its_steps(CachedFrames{GetParam()}, rng);
}

TEST(Parallel2dGpuDirectionCache, OnePassSumsOverTheNewGradientWhereTheExpansionCancels)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    for (const auto& geo : geometries()) {
        // (the one-pass adjoint's step runs on mirrored tiles)
        if (geo.name == "mirrored_tiles") {
            expect_one_pass_matches_its_steps(CachedFrames{geo, 1}, rng, true);
        }
    }
}

/// `check` on one frame of the mirrored geometry with one TV term, the
/// configs' regularizer, which takes launches compiled for it (the tests'
/// others take TV and a sign constraint), and without the adjoint's views
/// table (an image or view count beyond parallel2d_table_max_bytes), which
/// takes the calls apart.
void with_one_tv_term_and_without_the_views_table(
    std::mt19937_64& rng, void (*check)(const CachedFrames&, std::mt19937_64&))
{
    const auto all = geometries();
    const auto mirrored = std::find_if(all.begin(), all.end(), [](const Geometry& g) {
        return g.name == "mirrored_tiles";
    });
    ASSERT_NE(mirrored, all.end());
    {
        SCOPED_TRACE("one TV term");
        CachedFrames frames{*mirrored, 1};
        frames.terms = CachedFrames::one_tv_term();
        frames.state_size = static_cast<std::size_t>(
            kernels::regularizer_state_size(frames.terms, frames.grid, frames.batch));
        ASSERT_TRUE(expects_one_launch(frames));
        check(frames, rng);
    }
    {
        SCOPED_TRACE("no views table");
        CachedFrames frames{*mirrored, 1};
        auto view = std::get<kernels::Parallel2dView>(frames.gpu_view);
        view.adjoint_views = nullptr;
        frames.gpu_view = view;
        ASSERT_FALSE(expects_one_launch(frames));
        check(frames, rng);
    }
}

TEST(Parallel2dGpuDirectionCache, OnePassForOneTvTermAndWithoutTheViewsTable)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    with_one_tv_term_and_without_the_views_table(
        rng, [](const CachedFrames& frames, std::mt19937_64& r) {
            expect_one_pass_matches_its_steps(frames, r);
        });
}

TEST(Parallel2dGpuDirectionCache, OnePassOfAnImageTooLargeForOneCooperativeAdjoint)
{
    // 640 x 600 pixels: 1,520 tiles, more adjoint blocks than any GPU holds
    // at once (two per SM), so the one-pass call takes its two calls.
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    expect_one_pass_matches_its_steps(
        CachedFrames{{"large", 640, 600, 700, spread_angles(5, 7.0), 0.5}, 1}, rng);
}

/// The fused form's iteration that a residual replacement starts, in one
/// call (cgnr_step_replacement: for one frame on mirrored tiles x_k's pair
/// images, the rays of d and x_k in one walk, and the one-pass step's
/// cooperative adjoint, which back-projects r before A d;
/// expects_one_launch), against residual, apply_adjoint and
/// cgnr_step_one_pass called apart; and the same call with
/// RECON_UPDATE_DIRECTION=cooperative (the calls one after the other
/// inside) against residual, apply_adjoint, cgnr_step_normal_dots and
/// cgnr_step_update_direction: every vector and scalar bit for bit (the
/// walk's A d and A x − b, and the step's Aᵀ r, take the same operations
/// as the products apart), the pair images of d equal to ones made afresh. h
/// starts far from Aᵀ(A x − b), so a step from the recurrence's h does not
/// pass. The state F reads and the one made for the next iteration are one
/// buffer, as the solver passes them. Frame 0 runs or has stopped (then it
/// keeps x, d and its scalars); with 3 frames, frame 1 has stopped.
void expect_replacement_matches_its_steps(const CachedFrames& frames, std::mt19937_64& rng)
{
    const auto& [geo, batch, model, grid, gpu_view, len, terms, state_size, cache_size] = frames;
    SCOPED_TRACE(geo.name);
    ASSERT_GT(cache_size, 0U);
    const kernels::CgnrParams params{50, 0.0};
    auto image = [&] { return test::random_vector(len, rng); };
    const auto d = image(), x = image(), g = image(), h = image(), p = image();
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    std::vector<float> state(state_size);
    kernels::regularizer_prepare(Executor::cpu(), terms, grid, batch, cview_of(p), view_of(state));
    const auto db = upload(b);
    const auto in = [](kernels::View<float> v) {
        return kernels::View<const float>{v.data, v.size};
    };
    for (const SolveStatus first : {SolveStatus::running, SolveStatus::converged}) {
        SCOPED_TRACE(first == SolveStatus::running ? "frame 0 runs" : "frame 0 has stopped");
        const auto scalars = start_scalars(batch, first, 1e12);
        for (const bool regularized : {true, false}) {
            SCOPED_TRACE(regularized ? "regularized" : "no regularizer");
            struct Run {
                kernels::Array<float> d, x, g, h, u, e, fx, r, cache, state;
                kernels::Array<kernels::CgnrScalars> s;
            };
            auto start = [&] {
                Run run{upload(d),          upload(x),          upload(g),
                        upload(h),          poisoned(len),      poisoned(len),
                        poisoned(len),      poisoned(b.size()), poisoned(cache_size),
                        upload(state),      kernels::Array<kernels::CgnrScalars>{gpu(), scalars}};
                kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(run.d),
                                              run.cache.view());
                return run;
            };
            const auto used = regularized ? terms : kernels::RegularizerTerms{};
            // Without a regularizer e is u and g is h, as the solver passes them.
            auto e_of = [&](Run& r) { return regularized ? r.e.view() : r.u.view(); };
            auto g_of = [&](Run& r) { return regularized ? r.g.view() : r.h.view(); };
            auto fx_of = [&](Run& r) { return regularized ? r.fx.view() : kernels::View<float>{}; };
            auto fold_of = [&](Run& r) {
                return kernels::RegularizerFold{used, grid, cview(r.state), {}, cview(r.d)};
            };
            auto prepare_of = [&](Run& r) {
                return kernels::RegularizerPrepare{used, grid, cview(r.x), r.state.view()};
            };
            auto one_call = [&](Run& r) {
                kernels::cgnr_step_replacement(gpu(), gpu_view, params, batch, r.d.view(),
                                               r.u.view(), fold_of(r), e_of(r), fx_of(r),
                                               r.x.view(), cview(db), r.r.view(), r.h.view(),
                                               g_of(r), r.cache.view(), r.s.view(), prepare_of(r));
            };
            auto refresh = [&](Run& r) {
                kernels::residual(gpu(), gpu_view, batch, cview(r.x), cview(db), r.r.view());
                kernels::apply_adjoint(gpu(), gpu_view, batch, cview(r.r), r.h.view());
            };
            auto one = start(), one_steps = start(), apart = start(), apart_steps = start();
            one_call(one);
            refresh(one_steps);
            kernels::cgnr_step_one_pass(gpu(), gpu_view, params, batch, one_steps.d.view(),
                                        one_steps.u.view(), fold_of(one_steps), e_of(one_steps),
                                        fx_of(one_steps), one_steps.x.view(),
                                        one_steps.h.view(), g_of(one_steps),
                                        one_steps.cache.view(), one_steps.s.view(),
                                        prepare_of(one_steps));
            {
                const test::ScopedEnv calls{"RECON_UPDATE_DIRECTION", "cooperative"};
                one_call(apart);
            }
            refresh(apart_steps);
            kernels::cgnr_step_normal_dots(
                gpu(), gpu_view, batch, cview(apart_steps.d), apart_steps.u.view(), {},
                fold_of(apart_steps), in(g_of(apart_steps)), e_of(apart_steps),
                apart_steps.s.view(), cview(apart_steps.x), fx_of(apart_steps),
                cview(apart_steps.cache));
            kernels::cgnr_step_update_direction(
                gpu(), gpu_view, params, batch, apart_steps.d.view(), cview(apart_steps.u),
                in(e_of(apart_steps)), in(fx_of(apart_steps)), apart_steps.x.view(),
                apart_steps.h.view(), g_of(apart_steps), apart_steps.cache.view(),
                apart_steps.s.view(), prepare_of(apart_steps));
            for (auto [run, steps] :
                 {std::pair{&one, &one_steps}, std::pair{&apart, &apart_steps}}) {
                SCOPED_TRACE(run == &one ? "one call" : "the calls apart");
                for (auto [got, want] :
                     std::vector<std::pair<kernels::Array<float>*, kernels::Array<float>*>>{
                         {&run->u, &steps->u}, {&run->e, &steps->e}, {&run->fx, &steps->fx},
                         {&run->x, &steps->x}, {&run->r, &steps->r}, {&run->h, &steps->h},
                         {&run->g, &steps->g}, {&run->state, &steps->state},
                         {&run->d, &steps->d}, {&run->cache, &steps->cache}}) {
                    const auto a = got->to_host(), w = want->to_host();
                    EXPECT_EQ(std::memcmp(a.data(), w.data(), a.size() * sizeof(float)), 0)
                        << "every vector bit for bit";
                }
                const auto s1 = run->s.to_host(), s2 = steps->s.to_host();
                for (int f = 0; f < batch; ++f) {
                    SCOPED_TRACE("frame " + std::to_string(f));
                    EXPECT_EQ(s1[f].status, s2[f].status);
                    EXPECT_EQ(s1[f].iterations, s2[f].iterations);
                    for (auto field : {&kernels::CgnrScalars::f, &kernels::CgnrScalars::gd,
                                       &kernels::CgnrScalars::alpha, &kernels::CgnrScalars::gg,
                                       &kernels::CgnrScalars::ge, &kernels::CgnrScalars::beta}) {
                        EXPECT_EQ(s1[f].*field, s2[f].*field) << "scalars";
                    }
                }
                auto fresh = poisoned(cache_size);
                kernels::direction_cache_fill(gpu(), gpu_view, batch, cview(run->d), fresh.view());
                EXPECT_EQ(run->cache.to_host(), fresh.to_host())
                    << "pair images, against ones made afresh";
                if (first != SolveStatus::running) {
                    const auto pixels = static_cast<std::size_t>(grid.size());
                    const auto frame0 = [&](const std::vector<float>& v) {
                        return std::vector<float>(v.begin(), v.begin() + pixels);
                    };
                    EXPECT_EQ(frame0(run->x.to_host()), frame0(x)) << "a stopped frame keeps x";
                    EXPECT_EQ(frame0(run->d.to_host()), frame0(d)) << "and d";
                    EXPECT_EQ(s1[0].iterations, 4) << "and its scalars";
                    EXPECT_EQ(s1[0].f, scalars[0].f);
                } else {
                    EXPECT_EQ(s1[0].status, SolveStatus::running);
                    EXPECT_EQ(s1[0].iterations, 5);
                }
            }
            // The refresh took: h moved from Aᵀ(A x_k − b), not from the h it was given.
            auto stale = start();
            kernels::cgnr_step_one_pass(gpu(), gpu_view, params, batch, stale.d.view(),
                                        stale.u.view(), fold_of(stale), e_of(stale), fx_of(stale),
                                        stale.x.view(), stale.h.view(), g_of(stale),
                                        stale.cache.view(), stale.s.view(), prepare_of(stale));
            if (first == SolveStatus::running) {
                EXPECT_NE(stale.h.to_host(), one.h.to_host()) << "the test's premise";
            }
        }
    }
}

TEST_P(Parallel2dGpuDirectionCache, ReplacementMatchesItsSteps)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    expect_replacement_matches_its_steps(CachedFrames{GetParam()}, rng);
}

TEST(Parallel2dGpuDirectionCache, ReplacementForOneTvTermAndWithoutTheViewsTable)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    with_one_tv_term_and_without_the_views_table(rng, expect_replacement_matches_its_steps);
}

TEST(Parallel2dGpuDirectionCache, IsKeptOnlyWhereTheRaysReadPairImages)
{
    // 4 frames go through the staged lines (or make their own pair images);
    // other systems have no copy of d; a cache of the wrong size is a clear
    // error.
    RECON_REQUIRE_GPU();
    const Parallel2d model{40, 30, 33, spread_angles(12, 2.0), 0.0};
    const auto gpu_view = model.view(gpu());
    EXPECT_GT(kernels::direction_cache_size(gpu(), gpu_view, 1), 0);
    EXPECT_EQ(kernels::direction_cache_size(gpu(), gpu_view, 4), 0);
    EXPECT_EQ(kernels::direction_cache_size(gpu(), gpu_view, 5), 0);
    {
        const RaysMode lines{"lines"};
        EXPECT_EQ(kernels::direction_cache_size(gpu(), gpu_view, 1), 0);
    }
    const Synthetic synthetic{500, 300, 2000, 7};
    EXPECT_EQ(kernels::direction_cache_size(gpu(), synthetic.view(gpu()), 1), 0);
    const auto size = static_cast<std::size_t>(kernels::direction_cache_size(gpu(), gpu_view, 2));
    auto d = poisoned(static_cast<std::size_t>(model.cols()) * 2);
    auto wrong = poisoned(size - 2);
    try {
        kernels::direction_cache_fill(gpu(), gpu_view, 2, cview(d), wrong.view());
        FAIL() << "a cache of the wrong size was taken";
    } catch (const std::invalid_argument& e) {
        const std::string want = "direction cache of " + std::to_string(size - 2) +
                                 " floats, the system keeps " + std::to_string(size);
        EXPECT_NE(std::string{e.what()}.find(want), std::string::npos) << e.what();
    }
}

/// The products of one frame do not depend on the frames batched with it:
/// frame 2 of a batch of 5 (in the 4-frame kernels) equals the same input
/// alone (the single-frame kernels), element for element up to rounding.
TEST(Parallel2dGpuBatch, FramesAreIndependentOfTheirBatch)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model{53, 40, 47, spread_angles(71, 1.5), -0.75};
    const index_t m = model.rows(), n = model.cols();
    const auto gpu_view = model.view(gpu());
    const int batch = 5, frame = 2;
    const auto x = test::random_vector(static_cast<std::size_t>(n) * batch, rng);
    const auto y = test::random_vector(static_cast<std::size_t>(m) * batch, rng);
    const std::vector<float> x1(x.begin() + frame * n, x.begin() + (frame + 1) * n);
    const std::vector<float> y1(y.begin() + frame * m, y.begin() + (frame + 1) * m);
    auto ax = poisoned(static_cast<std::size_t>(m) * batch), ax1 = poisoned(m);
    auto aty = poisoned(static_cast<std::size_t>(n) * batch), aty1 = poisoned(n);
    const auto dx = upload(x), dy = upload(y), dx1 = upload(x1), dy1 = upload(y1);
    kernels::apply(gpu(), gpu_view, batch, cview(dx), ax.view());
    kernels::apply(gpu(), gpu_view, 1, cview(dx1), ax1.view());
    kernels::apply_adjoint(gpu(), gpu_view, batch, cview(dy), aty.view());
    kernels::apply_adjoint(gpu(), gpu_view, 1, cview(dy1), aty1.view());
    const auto h_ax = ax.to_host(), h_aty = aty.to_host();
    expect_close(std::vector<float>(h_ax.begin() + frame * m, h_ax.begin() + (frame + 1) * m),
                 ax1.to_host(), 1e-6, "A x, frame 2 of 5 against alone");
    expect_close(std::vector<float>(h_aty.begin() + frame * n, h_aty.begin() + (frame + 1) * n),
                 aty1.to_host(), 1e-6, "Aᵀ y, frame 2 of 5 against alone");
}

/// Sets RECON_PARALLEL2D_ADJOINT for one test.
struct AdjointMode : test::ScopedEnv {
    explicit AdjointMode(const char* mode) : ScopedEnv{"RECON_PARALLEL2D_ADJOINT", mode} {}
};

/// One frame's adjoint with mirrored tiles (each weight computed once for a
/// pixel and its reflection) against the same with a tile per block
/// (RECON_PARALLEL2D_ADJOINT=tiles): the reflected pixels' weights are the
/// computed pixels' ones, which rows.hpp's float arithmetic may round apart
/// in the last bits, and the views are summed in 16 groups instead of 12,
/// so Aᵀ y agrees within the rounding of its sums (as with the CPU); and a
/// whole solve with TV (the step in the adjoint's cooperative launch)
/// against the same and the CPU's.
TEST(Parallel2dGpuMirrored, MirroredTilesMatchATilePerBlock)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model{96, 64, 137, spread_angles(60, 0.25), 0.0};
    const index_t m = model.rows(), n = model.cols();
    const auto gpu_view = model.view(gpu());
    const auto y = test::random_vector(static_cast<std::size_t>(m), rng);
    const auto dy = upload(y);
    auto adjoint = [&](const char* mode) {
        const AdjointMode chosen{mode};
        auto aty = poisoned(static_cast<std::size_t>(n));
        kernels::apply_adjoint(gpu(), gpu_view, 1, cview(dy), aty.view());
        return aty.to_host();
    };
    const auto mirrored = adjoint("auto"), tiles = adjoint("tiles");
    ASSERT_GT(test::norm(tiles), 0.0);
    // (3.9e-6 apart for one seed on an H200, 60 views)
    expect_close(mirrored, tiles, 1e-5, "Aᵀ y, mirrored tiles against a tile per block");

    const auto images = test::random_vector(static_cast<std::size_t>(n), rng, 0.5f, 1.5f);
    std::vector<float> b(static_cast<std::size_t>(m));
    kernels::apply(Executor::cpu(), model.view(Executor::cpu()), 1, cview_of(images), view_of(b));
    auto solve = [&](const char* mode) {
        const AdjointMode chosen{mode};
        SolverOptions o;
        o.launch = SolveLaunch::graph;
        o.max_iterations = 20;
        o.residual_replacement = 10;
        CgnrSolver solver{model, Regularizer::parse("tv:0.02", 0.01), o, gpu(), 1};
        return test::solve_frames(solver, b);
    };
    const auto [x_mirrored, r_mirrored] = solve("auto");
    const auto [x_tiles, r_tiles] = solve("tiles");
    EXPECT_EQ(r_mirrored[0].iterations, 20);
    EXPECT_EQ(r_tiles[0].iterations, 20);
    SolverOptions on_cpu;
    on_cpu.max_iterations = 20;
    on_cpu.residual_replacement = 10;
    CgnrSolver cpu_solver{model, Regularizer::parse("tv:0.02", 0.01), on_cpu, Executor::cpu(), 1};
    const auto [x_cpu, r_cpu] = test::solve_frames(cpu_solver, b);
    // 20 iterations carry the last bits of the weights and of the sums into
    // x: CG's directions turn with every rounding. Over 150 seeds (H200) x
    // was within 1.8e-3 of the CPU's solve, and the misfits ‖A x − b‖ / ‖b‖
    // (~2e-3) within 2.7 % of the CPU's, with no bias (mean +0.01 %); the
    // two GPU solves apart by up to 5.5 % in 300 more seeds. A tile stepped
    // wrongly would be off by the size of x and fit b far worse.
    EXPECT_LE(test::rel_error(x_mirrored, x_tiles), 1e-2);
    EXPECT_LE(test::rel_error(x_mirrored, x_cpu), 1e-2);
    auto misfit = [&](const std::vector<float>& x) {
        std::vector<float> ax(static_cast<std::size_t>(m));
        kernels::apply(Executor::cpu(), model.view(Executor::cpu()), 1, cview_of(x), view_of(ax));
        return test::rel_error(ax, b);
    };
    const double misfit_cpu = misfit(x_cpu);
    EXPECT_GT(misfit_cpu, 0.0);
    EXPECT_NEAR(misfit(x_mirrored), misfit_cpu, 0.1 * misfit_cpu);
    EXPECT_NEAR(misfit(x_tiles), misfit_cpu, 0.1 * misfit_cpu);
}

/// A parallel-beam solve gives the same bits every time it runs: the
/// image, and each frame's iterations, status and relative gradient. Every
/// sum on its path is added in one fixed order: the rays, the adjoint's
/// groups, the blocks' partials, also where a reduction's last block is
/// whichever ends last (frame_reduce_arrive: ‖Aᵀb‖, the dot steps of the
/// residual replacements). Five solves of the same frames each: one frame
/// (mirrored tiles, the step in the adjoint's launch) and 4 frames (the
/// 4-frame kernels), as the graph and as the host loop, with TV to the
/// last iteration and without a regularizer stopping on the tolerance.
TEST(Parallel2dGpuSolve, RepeatedSolvesGiveTheSameBits)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    // nx a multiple of 32, ny of 16 and the detector centred: mirrored
    // tiles. 32,768 pixels: 64 blocks a frame in the reductions.
    const Parallel2d model{256, 128, 300, spread_angles(48, 0.3), 0.0};
    const index_t m = model.rows(), n = model.cols();
    constexpr int frames = 4;
    const auto images = test::random_vector(static_cast<std::size_t>(n) * frames, rng, 0.0f, 1.0f);
    std::vector<float> b(static_cast<std::size_t>(m) * frames);
    kernels::apply(Executor::cpu(), model.view(Executor::cpu()), frames, cview_of(images),
                   view_of(b));
    for (float& v : b) v += 0.05f * std::normal_distribution<float>{}(rng);
    struct Run {
        int batch;
        SolveLaunch launch;
        bool tv;
    };
    for (const Run run :
         {Run{1, SolveLaunch::graph, true}, Run{1, SolveLaunch::graph, false},
          Run{1, SolveLaunch::host_loop, true}, Run{frames, SolveLaunch::graph, true},
          Run{frames, SolveLaunch::host_loop, false}}) {
        SCOPED_TRACE(std::to_string(run.batch) + " frame(s), " + to_string(run.launch) +
                     (run.tv ? ", TV" : ", tolerance"));
        SolverOptions o;
        o.launch = run.launch;
        o.max_iterations = run.tv ? 40 : 300;
        o.tolerance = run.tv ? 0.0 : 1e-3;  // ~60 iterations
        o.residual_replacement = 10;
        const Regularizer regularizer =
            run.tv ? Regularizer::parse("tv:0.02", 0.01) : Regularizer{};
        CgnrSolver solver{model, regularizer, o, gpu(), run.batch};
        const std::vector<float> frames_b(b.begin(),
                                          b.begin() + static_cast<std::ptrdiff_t>(m) * run.batch);
        const auto [x_first, r_first] = test::solve_frames(solver, frames_b);
        for (const FrameResult& r : r_first) {
            EXPECT_EQ(r.status, run.tv ? SolveStatus::max_iterations : SolveStatus::converged);
        }
        for (int repeat = 1; repeat < 5; ++repeat) {
            const auto [x, r] = test::solve_frames(solver, frames_b);
            for (int f = 0; f < run.batch; ++f) {
                SCOPED_TRACE("repeat " + std::to_string(repeat) + ", frame " + std::to_string(f));
                EXPECT_EQ(r[f].status, r_first[f].status);
                EXPECT_EQ(r[f].iterations, r_first[f].iterations);
                EXPECT_EQ(r[f].rel_gradient, r_first[f].rel_gradient)  // bits: not NEAR
                    << std::hexfloat << r[f].rel_gradient << " against "
                    << r_first[f].rel_gradient;
            }
            ASSERT_EQ(x.size(), x_first.size());
            EXPECT_EQ(std::memcmp(x.data(), x_first.data(), x.size() * sizeof(float)), 0)
                << "the images differ in their bits";
        }
    }
}

/// A product on a 32 x 32 image (mirrored tiles where the switch allows)
/// with `variable` set to `value`: a one-line error naming both.
void expect_unknown_mode_error(const char* variable, const char* value, bool adjoint)
{
    const Parallel2d model{32, 32, 16, spread_angles(4, 0.0), 0.0};
    const auto gpu_view = model.view(gpu());
    auto x = poisoned(static_cast<std::size_t>(model.cols()));
    auto y = poisoned(static_cast<std::size_t>(model.rows()));
    const test::ScopedEnv mode{variable, value};
    try {
        if (adjoint) {
            kernels::apply_adjoint(gpu(), gpu_view, 1, cview(y), x.view());
        } else {
            kernels::apply(gpu(), gpu_view, 1, cview(x), y.view());
        }
        FAIL() << "expected an error for " << variable << "=" << value;
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string{e.what()}.find(variable), std::string::npos) << e.what();
        EXPECT_NE(std::string{e.what()}.find(std::string{"'"} + value + "'"), std::string::npos)
            << e.what();
    }
}

TEST(Parallel2dGpuMirrored, AnUnknownModeIsAClearError)
{
    RECON_REQUIRE_GPU();
    expect_unknown_mode_error("RECON_PARALLEL2D_ADJOINT", "mirror", true);
}

TEST(Parallel2dGpuRays, AnUnknownModeIsAClearError)
{
    RECON_REQUIRE_GPU();
    expect_unknown_mode_error("RECON_PARALLEL2D_RAYS", "lines-please", false);
}

}  // namespace
}  // namespace recon
