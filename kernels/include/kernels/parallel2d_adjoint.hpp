#pragma once
// The parallel-beam adjoint's per-view constants for a tile of pixels (the
// pixel-driven Aᵀ y of cuda/parallel2d_kernels.cuh): shared by the kernel,
// which makes them where the system has no table, and by the host, which
// makes the table once per system (Parallel2d::view). Every operation is
// rounded one by one (rows.hpp), so the host's table holds the bits the
// device would compute.
//
// Why a table: each adjoint block made its 180 views' constants (ct_256)
// before staging any y, a thread per view: the view's angle loaded, two
// divisions, four corners' candidate bins, ~0.9 µs of every iteration
// (block 0's clock, history v33) on the path before the view loop. Loading
// 48 bytes is one round trip to L2.

#include <cstddef>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/rows.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {

constexpr int adjoint_tile = 16;    // pixels per tile side
constexpr int adjoint_window = 32;  // bins staged per view and tile (≤ 25 needed)

/// Per-view constants of the adjoint for one tile. The first eight words
/// are read per (thread, view); the rest only while staging. The tile's
/// pixels read the bins [first_bin, first_bin + window_bins) of the view
/// (the straddling pair of each); 0 window_bins: the view is skipped (its
/// constants not finite, or a window wider than adjoint_window).
struct alignas(16) AdjointView {
    float slope, cv, ku, u0;  // u(k, j) = j * cv + (k * ku + u0) ≈ (bin where p = j) − 1/2
    int kbias;                // table index = bits(u + magic) − kbias
    int step_y, window_bins, first_bin;
    float inv, slope_c_major, c_minor, scale;
};

/// The part of u(k, j) that a row of pixels (one k) shares: k * ku + u0.
RECON_HD float candidate_row(float slope_u, float u0, float kf)
{
    return fma_rn(kf, slope_u, u0);
}

/// u(k, j) + magic from the row's part (candidate_row): bits(result) −
/// bits(magic) is the pixel's first bin (below).
RECON_HD float candidate_sum_in_row(float row, float cv, float jf)
{
    return add_rn(fma_rn(jf, cv, row), magic);
}

/// The straddling bin pair of (k, j) is r, r + 1 with r = the value of
/// bits(candidate_sum(...)) − bits(magic); the same operations for the
/// tile's corners and for each pixel (the kernels take the row's part once
/// for its two pixels), so each pixel's r lies between the corners' (every
/// step is monotone in k and j).
RECON_HD float candidate_sum(float slope_u, float cv, float u0, float kf, float jf)
{
    return candidate_sum_in_row(candidate_row(slope_u, u0, kf), cv, jf);
}

/// The view's constants for the tile with corner (tx0, ty0).
RECON_HD AdjointView adjoint_view(const Parallel2dView& v, index_t view, index_t tx0, index_t ty0)
{
    const ViewGeometry g = view_geometry(v, view);
    AdjointView a;
    a.slope = g.slope;
    a.cv = 1.0f / g.inv;
    a.ku = mul_rn(-g.slope, a.cv);
    const float bins_centre = 0.5f * static_cast<float>(v.bins - 1);
    a.u0 = sub_rn(add_rn(add_rn(mul_rn(sub_rn(g.slope_c_major, g.c_minor), a.cv), bins_centre),
                         v.center_offset),
                  0.5f);
    a.step_y = g.step_y ? 1 : 0;
    a.inv = g.inv;
    a.slope_c_major = g.slope_c_major;
    a.c_minor = g.c_minor;
    a.scale = g.scale;
    const float k_lo = static_cast<float>(g.step_y ? ty0 : tx0);
    const float j_lo = static_cast<float>(g.step_y ? tx0 : ty0);
    const float last = static_cast<float>(adjoint_tile - 1);
    int r_min = 0, r_max = 0;
    bool finite = is_finite(a.cv) && is_finite(a.ku) && is_finite(a.u0) && is_finite(g.slope) &&
                  is_finite(g.inv) && is_finite(g.slope_c_major);
    for (int corner = 0; corner < 4; ++corner) {
        const float kf = k_lo + ((corner & 1) != 0 ? last : 0.0f);
        const float jf = j_lo + ((corner & 2) != 0 ? last : 0.0f);
        const float sum = candidate_sum(a.ku, a.cv, a.u0, kf, jf);
        // The trick needs |u| < 2^22: bins far beyond any detector.
        finite = finite && fabsf(sub_rn(sum, magic)) < 4194304.0f;
        const int r = float_bits(sum) - float_bits(magic);
        r_min = corner == 0 ? r : (r < r_min ? r : r_min);
        r_max = corner == 0 ? r : (r > r_max ? r : r_max);
    }
    a.window_bins = finite && r_max - r_min <= adjoint_window - 2 ? r_max - r_min + 2 : 0;
    a.first_bin = a.window_bins != 0 ? r_min : 0;
    a.kbias = float_bits(magic) + a.first_bin;
    return a;
}

/// Tiles of adjoint_tile pixels a side along an axis of `pixels` (the last
/// one may be cut). The pair images' tiles are the same (system_kernels.cu).
RECON_HD index_t adjoint_tiles(index_t pixels)
{
    return (pixels + adjoint_tile - 1) / adjoint_tile;
}

/// Where the table keeps the constants of `view` for the tile with corner
/// (tx0, ty0): tile by tile, row-major, each tile's views together.
RECON_HD size_type adjoint_views_entry(const Parallel2dView& v, index_t view, index_t tx0,
                                       index_t ty0)
{
    const size_type tile = static_cast<size_type>(ty0 / adjoint_tile) * adjoint_tiles(v.nx) +
                           tx0 / adjoint_tile;
    return tile * v.views + view;
}

/// Every tile's constants for every view (adjoint_views_entry's layout), or
/// nothing above parallel2d_table_max_bytes. `v` with host pointers.
inline std::vector<AdjointView> adjoint_views_table(const Parallel2dView& v)
{
    const auto entries = static_cast<std::size_t>(adjoint_tiles(v.nx)) *
                         static_cast<std::size_t>(adjoint_tiles(v.ny)) *
                         static_cast<std::size_t>(v.views);
    if (entries * sizeof(AdjointView) > parallel2d_table_max_bytes) return {};
    std::vector<AdjointView> table(entries);
    for (index_t ty0 = 0; ty0 < v.ny; ty0 += adjoint_tile) {
        for (index_t tx0 = 0; tx0 < v.nx; tx0 += adjoint_tile) {
            for (index_t view = 0; view < v.views; ++view) {
                table[adjoint_views_entry(v, view, tx0, ty0)] = adjoint_view(v, view, tx0, ty0);
            }
        }
    }
    return table;
}

}  // namespace recon::kernels
