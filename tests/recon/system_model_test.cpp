// System models: the adjoint identity for every model and layout, the
// synthetic matrix's sizes and reproducibility, stored = on the fly, and
// parallel2d against analytic line integrals of an ellipse.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "kernels/parallel2d_adjoint.hpp"
#include "kernels/parallel2d_rays.hpp"
#include "kernels/rows.hpp"
#include "recon/system_model.hpp"
#include "test_utils.hpp"

namespace recon {
namespace {

using test::cview_of;
using test::view_of;

/// ⟨A x, y⟩ = ⟨x, Aᵀ y⟩ on fresh random x, y, for `batch` frames at once.
void expect_adjoint_identity(const SystemModel& model, int batch = 1)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto m = static_cast<std::size_t>(model.rows());
    const auto n = static_cast<std::size_t>(model.cols());
    const auto x = test::random_vector(n * batch, rng);
    const auto y = test::random_vector(m * batch, rng);
    std::vector<float> ax(m * batch, NAN), aty(n * batch, NAN);
    const Executor cpu = Executor::cpu();
    model.apply(cpu, cview_of(x), view_of(ax), batch);
    model.apply_adjoint(cpu, cview_of(y), view_of(aty), batch);
    for (int b = 0; b < batch; ++b) {
        double lhs = 0, rhs = 0, scale = 0;
        for (std::size_t i = 0; i < m; ++i) {
            lhs += static_cast<double>(ax[b * m + i]) * y[b * m + i];
            scale += std::abs(static_cast<double>(ax[b * m + i]) * y[b * m + i]);
        }
        for (std::size_t j = 0; j < n; ++j) rhs += static_cast<double>(x[b * n + j]) * aty[b * n + j];
        EXPECT_LE(std::abs(lhs - rhs), 1e-5 * scale) << "frame " << b << ": " << lhs << " vs " << rhs;
    }
}

std::vector<double> even_angles(int views, double range = 180.0)
{
    std::vector<double> a;
    for (int k = 0; k < views; ++k) a.push_back(range * k / views);
    return a;
}

TEST(Parallel2d, AdjointIdentityOnSquareAndRectangularGrids)
{
    expect_adjoint_identity(Parallel2d{64, 64, 64, even_angles(45)});
    expect_adjoint_identity(Parallel2d{37, 20, 50, even_angles(31), 1.25});
    expect_adjoint_identity(Parallel2d{16, 48, 40, {0.0, 45.0, 90.0, 135.0, 200.0, 333.3}, -2.5}, 3);
}

/// A parallel-beam system whose sizes are no multiple of the GPU kernels'
/// blocks and tiles (48 x 40 pixels, 57 bins, 45 views 4 degrees apart):
/// the host tests of the tables the model makes for them.
Parallel2d odd_sized_parallel2d()
{
    std::vector<double> angles;
    for (int k = 0; k < 45; ++k) angles.push_back(4.0 * k + 0.3);
    return Parallel2d{48, 40, 57, angles, 0.5};
}

/// The GPU rays kernel's order of blocks (kernels/parallel2d_rays.hpp):
/// every item once, the most steps first; and its estimate of a ray's steps
/// against the steps at which rows.hpp gives the ray an entry.
TEST(Parallel2d, RaysOrderTakesEveryBlockOnceLongestFirst)
{
    const Parallel2d model = odd_sized_parallel2d();
    const auto v = std::get<kernels::Parallel2dView>(model.view(Executor::cpu()));
    // host views carry none of the GPU kernels' tables
    EXPECT_EQ(v.rays_order, nullptr);
    EXPECT_EQ(v.rays, nullptr);
    EXPECT_EQ(v.adjoint_views, nullptr);
    const auto order = kernels::rays_order(v);
    const index_t items = kernels::ray_blocks(v);
    ASSERT_EQ(static_cast<index_t>(order.size()), items);
    EXPECT_EQ(items, 12 * 8);  // 45 views in groups of 4, 57 bins in groups of 8
    std::vector<std::int32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (index_t i = 0; i < items; ++i) ASSERT_EQ(sorted[i], i);

    auto item_steps = [&](std::int32_t item) { return kernels::rays_item_steps(v, item); };
    for (index_t i = 1; i < items; ++i) {
        EXPECT_GE(item_steps(order[i - 1]), item_steps(order[i])) << "position " << i;
    }
    EXPECT_GT(item_steps(order.front()), 2.0 * item_steps(order.back()));

    // Each ray's entries lie on about as many major steps as estimated.
    for (index_t view = 0; view < v.views; view += 7) {
        const auto g = kernels::view_geometry(v, view);
        for (index_t bin = 0; bin < v.bins; bin += 5) {
            std::set<index_t> steps;
            kernels::for_each_entry(v, view * v.bins + bin, [&](index_t col, float) {
                steps.insert(g.step_y ? col / v.nx : col % v.nx);
            });
            EXPECT_NEAR(kernels::ray_steps_estimate(v, view, bin),
                        static_cast<double>(steps.size()), 2.0)
                << "view " << view << ", bin " << bin;
        }
    }
}

/// The rays kernel's table of rays (kernels/parallel2d_rays.hpp): block by
/// block in the order's sequence, every ray once at its own lane, and every
/// major step at which rows.hpp gives a ray an entry inside its span.
TEST(Parallel2d, RaysSetupHasEveryRayOnceInLaunchOrder)
{
    const Parallel2d model = odd_sized_parallel2d();
    const auto v = std::get<kernels::Parallel2dView>(model.view(Executor::cpu()));
    const auto order = kernels::rays_order(v);
    const auto rays = kernels::rays_setup(v, order);
    constexpr int lanes = kernels::ray_lanes;
    ASSERT_EQ(rays.size(), order.size() * lanes);
    const index_t m = model.rows();
    std::vector<int> seen(static_cast<std::size_t>(m), 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
        const kernels::RaysItem at = kernels::rays_item(v, order[i]);
        for (int lane = 0; lane < lanes; ++lane) {
            const kernels::RaySetup& r = rays[i * lanes + lane];
            const index_t view = at.view_group * kernels::ray_views + lane / kernels::ray_bins;
            const index_t bin = at.bin_group * kernels::ray_bins + lane % kernels::ray_bins;
            if (view >= v.views || bin >= v.bins) {
                EXPECT_EQ(r.row, -1) << "block " << i << ", lane " << lane;
                continue;
            }
            ASSERT_EQ(r.row, view * v.bins + bin) << "block " << i << ", lane " << lane;
            ++seen[static_cast<std::size_t>(r.row)];
            const auto g = kernels::view_geometry(v, view);
            EXPECT_EQ(r.columns, g.step_y ? 0 : 1);
            EXPECT_EQ(r.line_stride, g.n_minor + 3);
            EXPECT_LE(0, r.begin);
            EXPECT_LE(r.begin, r.end);
            EXPECT_LE(r.end, g.n_major);
            kernels::for_each_entry(v, r.row, [&](index_t col, float) {
                const index_t k = g.step_y ? col / v.nx : col % v.nx;
                EXPECT_TRUE(k >= r.begin && k < r.end)
                    << "row " << r.row << ": an entry at step " << k << " outside [" << r.begin
                    << ", " << r.end << ")";
            });
        }
    }
    for (index_t row = 0; row < m; ++row) EXPECT_EQ(seen[row], 1) << "row " << row;

    // No table where it would be too large: blocks beyond 64 MB of rays.
    const std::size_t too_many =
        kernels::parallel2d_table_max_bytes / (lanes * sizeof(kernels::RaySetup)) + 1;
    EXPECT_TRUE(kernels::rays_setup(v, std::vector<std::int32_t>(too_many, 0)).empty());
}

/// The adjoint's table (kernels/parallel2d_adjoint.hpp): a tile's constants
/// for each view where the kernels look for them, the last, cut tiles
/// included, and no table where it would be too large.
TEST(Parallel2d, AdjointViewsTableHoldsEveryTileAndView)
{
    const Parallel2d model = odd_sized_parallel2d();
    const auto v = std::get<kernels::Parallel2dView>(model.view(Executor::cpu()));
    const auto table = kernels::adjoint_views_table(v);
    ASSERT_EQ(table.size(), std::size_t{3} * 3 * 45);  // 48 / 16 x ceil(40 / 16) tiles
    std::set<kernels::size_type> places;
    for (index_t ty0 = 0; ty0 < v.ny; ty0 += kernels::adjoint_tile) {
        for (index_t tx0 = 0; tx0 < v.nx; tx0 += kernels::adjoint_tile) {
            for (index_t view = 0; view < v.views; ++view) {
                const auto at = kernels::adjoint_views_entry(v, view, tx0, ty0);
                ASSERT_LT(at, table.size());
                places.insert(at);
                const kernels::AdjointView want = kernels::adjoint_view(v, view, tx0, ty0);
                const kernels::AdjointView& got = table[at];
                EXPECT_EQ(got.first_bin, want.first_bin);
                EXPECT_EQ(got.window_bins, want.window_bins);
                EXPECT_EQ(got.u0, want.u0);
                EXPECT_EQ(got.step_y, want.step_y);
                EXPECT_GE(got.window_bins, 2) << "view " << view << ", tile " << tx0 << ", " << ty0;
            }
        }
    }
    EXPECT_EQ(places.size(), table.size());

    kernels::Parallel2dView huge = v;
    huge.nx = huge.ny = 8192;
    huge.views = 720;
    EXPECT_TRUE(kernels::adjoint_views_table(huge).empty());
}

/// The adjoint stages only a tile's window of each view (window_bins bins
/// from first_bin): every pixel with a weight in a ray of the view lies
/// under the pair of bins the kernels take for it (candidate_sum's bits
/// less kbias, and the next), and that pair inside the window. Over every
/// tile, view and weight of rows.hpp's rows: an odd-sized image with an
/// off-centre detector, and one that the GPU's adjoint of one frame takes
/// on mirrored tiles (the detector centred), whose corner tiles' windows
/// reach past the detector.
TEST(Parallel2d, EveryWeightLiesInItsTilesWindow)
{
    std::vector<double> spread;
    for (int k = 0; k < 37; ++k) spread.push_back(0.4 + 180.0 * k / 37);
    for (const Parallel2d& model : {odd_sized_parallel2d(), Parallel2d{64, 48, 72, spread, 0.0}}) {
        const auto v = std::get<kernels::Parallel2dView>(model.view(Executor::cpu()));
        std::size_t weights = 0;
        for (index_t row = 0; row < model.rows(); ++row) {
            const index_t view = row / v.bins;
            const index_t bin = row - view * v.bins;
            kernels::for_each_entry(v, row, [&](index_t col, float w) {
                if (w == 0.0f) return;
                ++weights;
                const index_t ix = col % v.nx, iy = col / v.nx;
                const index_t tx0 = ix / kernels::adjoint_tile * kernels::adjoint_tile;
                const index_t ty0 = iy / kernels::adjoint_tile * kernels::adjoint_tile;
                const kernels::AdjointView a = kernels::adjoint_view(v, view, tx0, ty0);
                ASSERT_GE(a.window_bins, 2) << "view " << view;
                ASSERT_LE(a.window_bins, kernels::adjoint_window);
                const auto kf = static_cast<float>(a.step_y != 0 ? iy : ix);
                const auto jf = static_cast<float>(a.step_y != 0 ? ix : iy);
                const int index =
                    kernels::float_bits(kernels::candidate_sum(a.ku, a.cv, a.u0, kf, jf)) - a.kbias;
                ASSERT_GE(index, 0) << "pixel " << ix << ", " << iy << ", view " << view;
                ASSERT_LE(index + 1, a.window_bins - 1)
                    << "pixel " << ix << ", " << iy << ", view " << view;
                const index_t pair = a.first_bin + index;
                ASSERT_TRUE(bin == pair || bin == pair + 1)
                    << "pixel " << ix << ", " << iy << ", view " << view << ": bin " << bin
                    << " outside the pair from " << pair;
            });
        }
        EXPECT_GT(weights, std::size_t{1000});
    }
}

TEST(Synthetic, AdjointIdentityAndFractionalRowLength)
{
    expect_adjoint_identity(Synthetic{5000, 300, 28125, 7});
    expect_adjoint_identity(Synthetic{1000, 97, 3333, 11}, 4);
}

TEST(StoredMatrix, AdjointIdentityInBothLayouts)
{
    const Synthetic source{4000, 500, 40000, 3};
    expect_adjoint_identity(StoredMatrix{source.materialize(), MatrixLayout::csr});
    expect_adjoint_identity(StoredMatrix{source.materialize(), MatrixLayout::sliced_ell}, 2);
}

TEST(Synthetic, PaperSizesHaveExactlyTheirNonzeros)
{
    const Synthetic large = Synthetic::paper_large();
    const Synthetic small = Synthetic::paper_small();
    const auto large_csr = large.materialize();
    EXPECT_EQ(large_csr.rows, 320000);
    EXPECT_EQ(large_csr.cols, 3000);
    EXPECT_EQ(large_csr.nnz(), 1800000);
    kernels::size_type small_nnz = 0;
    for (index_t i = 0; i < small.rows(); ++i) {
        small_nnz += kernels::synthetic_row_length(std::get<kernels::SyntheticView>(small.view(Executor::cpu())), i);
    }
    EXPECT_EQ(small_nnz, 854129);
    EXPECT_NO_THROW(large_csr.validate("paper_large"));  // distinct, sorted, in range
}

TEST(Synthetic, RowsArePureFunctionsOfSeedAndIndex)
{
    const Synthetic a{1000, 300, 7777, 42}, b{1000, 300, 7777, 42}, c{1000, 300, 7777, 43};
    EXPECT_EQ(a.row(517), b.row(517));
    EXPECT_NE(a.row(517), c.row(517));
    const auto row = a.row(999);
    EXPECT_GE(row.size(), 7u);
    EXPECT_LE(row.size(), 8u);
}

TEST(StoredMatrix, MaterializedModelsMatchOnTheFly)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d geometry{40, 40, 48, even_angles(30), 0.5};
    const StoredMatrix stored{geometry.materialize(), MatrixLayout::sliced_ell};
    const auto x = test::random_vector(geometry.cols(), rng);
    std::vector<float> y1(geometry.rows()), y2(geometry.rows());
    geometry.apply(Executor::cpu(), cview_of(x), view_of(y1));
    stored.apply(Executor::cpu(), cview_of(x), view_of(y2));
    EXPECT_LT(test::rel_error(y2, y1), 1e-6);
}

/// Analytic projection of an ellipse of density rho, centre (x0, y0),
/// semi-axes (a, b), rotated by phi, along the ray x c + y s = t.
double ellipse_projection(double rho, double x0, double y0, double a, double b, double phi,
                          double c, double s, double t)
{
    // Rotate the ray's normal into the ellipse's frame.
    const double cp = std::cos(phi), sp = std::sin(phi);
    const double nc = c * cp + s * sp;
    const double ns = -c * sp + s * cp;
    const double tt = t - (x0 * c + y0 * s);
    const double r2 = a * a * nc * nc + b * b * ns * ns;
    if (tt * tt >= r2) return 0.0;
    return 2.0 * rho * a * b * std::sqrt(r2 - tt * tt) / r2;
}

TEST(Parallel2d, MatchesAnalyticLineIntegralsOfAnEllipse)
{
    const int n = 128;
    const int views = 24;
    const double rho = 1.0, x0 = 10.5, y0 = -7.0, a = 30.0, b = 18.0, phi = 0.4;
    // Rasterize with 8x8 supersampling in image coordinates (x right, y = row index down).
    std::vector<float> image(n * n, 0.0f);
    const int sub = 8;
    for (int iy = 0; iy < n; ++iy) {
        for (int ix = 0; ix < n; ++ix) {
            int inside = 0;
            for (int sy = 0; sy < sub; ++sy) {
                for (int sx = 0; sx < sub; ++sx) {
                    const double x = ix - (n - 1) / 2.0 + (sx + 0.5) / sub - 0.5 - x0;
                    const double y = iy - (n - 1) / 2.0 + (sy + 0.5) / sub - 0.5 - y0;
                    const double u = x * std::cos(phi) + y * std::sin(phi);
                    const double v = -x * std::sin(phi) + y * std::cos(phi);
                    inside += (u * u) / (a * a) + (v * v) / (b * b) <= 1.0;
                }
            }
            image[iy * n + ix] = static_cast<float>(rho * inside / (sub * sub));
        }
    }
    const Parallel2d geometry{n, n, n, even_angles(views)};
    std::vector<float> sino(geometry.rows());
    geometry.apply(Executor::cpu(), cview_of(image), view_of(sino));
    const auto view = std::get<kernels::Parallel2dView>(geometry.view(Executor::cpu()));
    std::vector<double> analytic(sino.size());
    for (int v = 0; v < views; ++v) {
        for (int k = 0; k < n; ++k) {
            const double t = k - (n - 1) / 2.0;
            analytic[v * n + k] = ellipse_projection(rho, x0, y0, a, b, phi, view.cos_angle[v],
                                                     view.sin_angle[v], t);
        }
    }
    // Pixelization and linear interpolation: about 1% in the 2-norm.
    EXPECT_LT(test::rel_error(sino, analytic), 0.02);
    // The integral over the detector is the ellipse's area times density, per view.
    for (int v = 0; v < views; ++v) {
        double sum = 0;
        for (int k = 0; k < n; ++k) sum += sino[v * n + k];
        EXPECT_NEAR(sum, rho * std::numbers::pi * a * b, 0.01 * std::numbers::pi * a * b) << "view " << v;
    }
}

TEST(Parallel2d, CenterOffsetShiftsTheProjection)
{
    const int n = 64;
    std::vector<float> image(n * n, 0.0f);
    image[(n / 2) * n + n / 2 - 5] = 1.0f;  // one pixel, left of centre
    const Parallel2d centred{n, n, n, {0.0}}, shifted{n, n, n, {0.0}, 3.0};
    std::vector<float> p0(n), p1(n);
    centred.apply(Executor::cpu(), cview_of(image), view_of(p0));
    shifted.apply(Executor::cpu(), cview_of(image), view_of(p1));
    for (int k = 0; k + 3 < n; ++k) EXPECT_FLOAT_EQ(p1[k + 3], p0[k]) << "bin " << k;
}

TEST(SystemSpec, FactoryBuildsEachGeometryAndRejectsBadParameters)
{
    SystemSpec spec;
    spec.geometry = "parallel2d";
    spec.nx = 32;
    spec.ny = 24;
    spec.views = 10;
    auto p = make_system_model(spec);
    EXPECT_EQ(p->rows(), 10 * 32);
    EXPECT_EQ(p->cols(), 32 * 24);
    EXPECT_EQ(p->image_shape().nx, 32);
    spec.geometry = "synthetic";
    spec.rows = 100;
    spec.cols = 50;
    spec.nnz = 550;
    EXPECT_EQ(make_system_model(spec)->kind(), "synthetic");
    spec.materialize = true;
    EXPECT_EQ(make_system_model(spec)->kind(), "matrix");

    SystemSpec bad;
    bad.geometry = "fanbeam";
    EXPECT_THROW(
        {
            try {
                make_system_model(bad);
            } catch (const std::invalid_argument& e) {
                EXPECT_NE(std::string{e.what()}.find("unknown geometry 'fanbeam'"), std::string::npos);
                throw;
            }
        },
        std::invalid_argument);
    bad.geometry = "parallel2d";
    bad.nx = 0;
    EXPECT_THROW(make_system_model(bad), std::invalid_argument);
    bad.nx = 16;
    bad.views = 4;
    bad.angles_deg = {0, 10, 20};  // 3 angles for 4 views
    EXPECT_THROW(make_system_model(bad), std::invalid_argument);
    SystemSpec matrix;
    matrix.geometry = "matrix";
    EXPECT_THROW(make_system_model(matrix), std::invalid_argument);  // no file named
}

}  // namespace
}  // namespace recon
