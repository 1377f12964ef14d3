#pragma once
// How the parallel-beam rays kernel (A x over pair images, see
// cuda/parallel2d_kernels.cuh) splits a system into blocks, and the order in
// which its blocks are handed out: shared by the kernel and by the host,
// which makes that order once per system (Parallel2d::view).
//
// A block takes ray_views neighbouring views x ray_bins neighbouring bins
// (one warp's lanes: 8 bins of each of 4 views) and splits each ray's steps
// over ray_segments warps. Every block of a system runs at once (ct_256:
// 1,440 blocks of 128 threads, 12 an SM on 132 SMs), so how long the kernel
// takes is how long its busiest SM takes; the blocks differ up to ~3x in
// their steps (a ray across the image's middle at 45° crosses a few times
// more than one near its corner), and the GPU deals blocks out to its SMs in
// turn in the order of their index. Handed out longest first, every SM gets
// one of the longest, then one of the next, and the SMs' sums come out
// nearly even (the centre-out order without the table: ~10 % longer by a
// count of ct_256's steps per SM; blocks of 4 views x 32 bins, before it:
// ~24 %). H200, recon bench, three rounds alternating: ct_256 with TV
// 13.43 ms (4 x 32 rays a block) -> 13.10 (4 x 8, centre-out) -> 12.65
// (4 x 8, this order).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/rows.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {

constexpr int ray_views = 4;     // neighbouring views per block
constexpr int ray_bins = 8;      // neighbouring bins per view and block
constexpr int ray_segments = 4;  // warps per block; each takes a quarter of every ray
static_assert(ray_views * ray_bins == 32, "a warp's lanes are the block's rays");
constexpr int ray_lanes = ray_views * ray_bins;  // a block's rays

/// A block's rays: views [view_group * ray_views, + ray_views), bins
/// [bin_group * ray_bins, + ray_bins).
struct RaysItem {
    index_t view_group, bin_group;
};

RECON_HD index_t ray_view_groups(const Parallel2dView& v)
{
    return (v.views + ray_views - 1) / ray_views;
}

RECON_HD index_t ray_bin_groups(const Parallel2dView& v) { return (v.bins + ray_bins - 1) / ray_bins; }

/// Blocks of the rays kernel for a system.
RECON_HD index_t ray_blocks(const Parallel2dView& v) { return ray_view_groups(v) * ray_bin_groups(v); }

/// Item `item` of a system, numbered view group by view group.
RECON_HD RaysItem rays_item(const Parallel2dView& v, index_t item)
{
    const index_t groups = ray_bin_groups(v);
    return {item / groups, item % groups};
}

/// The rays of block `block`: v.rays_order's item where the system has the
/// table; else the bin groups from the detector's centre outwards, every
/// view group of one before the next (rank 0, 1, 2, 3, ... -> the middle
/// group(s), then one further out on each side in turn).
RECON_HD RaysItem rays_block(const Parallel2dView& v, index_t block)
{
    if (v.rays_order != nullptr) return rays_item(v, v.rays_order[block]);
    const index_t bin_groups = ray_bin_groups(v);
    const index_t view_groups = ray_view_groups(v);
    const index_t rank = block / view_groups;
    const index_t view_group = block - rank * view_groups;
    const index_t bin_group = rank % 2 == 0
                                  ? (bin_groups - 1) / 2 - rank / 2
                                  : bin_groups / 2 + (rank - 1) / 2 + bin_groups % 2;
    return {view_group, bin_group};
}

/// The major steps [begin, end) of a ray whose crossings can give a pixel a
/// weight: every k with p in (−1, n_minor) is inside, and every k inside has
/// p in (−2, n_minor + 1), so the pair entry floor(p) + 2 exists. Takes
/// 1 / slope, which the staged-lines kernel computes once per view.
struct RaySpan {
    index_t begin = 0, end = 0;
};

RECON_HD RaySpan ray_span(float base, float slope, float inv_slope, index_t n_major,
                          index_t n_minor)
{
    RaySpan span;
    if (!(is_finite(base) && is_finite(slope))) return span;  // rows.hpp: no entries
    const float minor = static_cast<float>(n_minor);
    if (fabsf(slope) * static_cast<float>(n_major) < 0.25f) {
        // p moves by less than 0.25 along the ray: all steps or none.
        if (base > -1.25f && base < minor + 0.25f) span.end = n_major;
        return span;
    }
    // Margins of 0.5 in p; the float errors here (the product with the
    // rounded 1 / slope included) are ~1e-4 at most.
    const float ka = (-1.5f - base) * inv_slope;
    const float kb = (minor + 0.5f - base) * inv_slope;
    const float last = static_cast<float>(n_major);
    span.begin = static_cast<index_t>(fminf(fmaxf(ceilf(fminf(ka, kb)), 0.0f), last));
    span.end = static_cast<index_t>(fminf(fmaxf(floorf(fmaxf(ka, kb)) + 1.0f, 0.0f), last));
    if (span.end < span.begin) span.end = span.begin;
    return span;
}

/// What a ray of the rays kernel needs before its first step: its crossing
/// at k = 0 and its view's slope and scale (rows.hpp), the steps that can
/// give a weight (ray_span), where its row of y is, and which pair image it
/// reads. The system makes them once, for every block's lanes in the order
/// the blocks are handed out (rays_setup), so that a thread loads them (two
/// 16-byte loads) instead of finding its item, loading its view's angle and
/// dividing twice (~190 instructions a warp, behind two dependent loads).
struct alignas(16) RaySetup {
    float base = 0.0f, slope = 0.0f, scale = 0.0f;
    std::int32_t row = -1;          // view * bins + bin; −1: the lane has no ray
    std::int32_t begin = 0, end = 0;  // ray_span's major steps
    std::int32_t line_stride = 0;   // n_minor + 3: entries per line of its pair image
    std::int32_t columns = 0;       // 1 where it steps along x (the columns' pair image)
};

/// Where a system's table of rays keeps lane `lane` of block `block`:
/// block by block in launch order.
RECON_HD size_type ray_setup_entry(index_t block, int lane)
{
    return static_cast<size_type>(block) * ray_lanes + lane;
}

/// The ray of lane `lane` of a block that takes item `at`.
RECON_HD RaySetup ray_setup(const Parallel2dView& v, RaysItem at, int lane)
{
    RaySetup r;
    const index_t view = at.view_group * ray_views + lane / ray_bins;
    const index_t bin = at.bin_group * ray_bins + lane % ray_bins;
    if (view >= v.views || bin >= v.bins) return r;
    const ViewGeometry g = view_geometry(v, view);
    r.base = ray_base(v, g.inv, g.slope_c_major, g.c_minor, bin);
    r.slope = g.slope;
    r.scale = g.scale;
    r.row = static_cast<std::int32_t>(view * v.bins + bin);
    const RaySpan span = ray_span(r.base, g.slope, 1.0f / g.slope, g.n_major, g.n_minor);
    r.begin = static_cast<std::int32_t>(span.begin);
    r.end = static_cast<std::int32_t>(span.end);
    r.line_stride = static_cast<std::int32_t>(g.n_minor + 3);
    r.columns = g.step_y ? 0 : 1;
    return r;
}

/// About how many major steps of the ray of (view, bin) give a pixel a
/// weight (the k whose crossing lies in (−1, n_minor)); for ordering blocks
/// only, so the crossings in double from rows.hpp's base.
inline double ray_steps_estimate(const Parallel2dView& v, index_t view, index_t bin)
{
    const ViewGeometry g = view_geometry(v, view);
    const double base = ray_base(v, g.inv, g.slope_c_major, g.c_minor, bin);
    const double lo = -1.0, hi = static_cast<double>(g.n_minor);
    const double n_major = static_cast<double>(g.n_major);
    if (!std::isfinite(base) || !std::isfinite(g.slope)) return 0.0;
    if (std::abs(g.slope) * n_major < 1e-6) return base > lo && base < hi ? n_major : 0.0;
    const double ka = (lo - base) / g.slope, kb = (hi - base) / g.slope;
    const double begin = std::clamp(std::min(ka, kb), 0.0, n_major);
    const double end = std::clamp(std::max(ka, kb), 0.0, n_major);
    return end - begin;
}

/// An item's steps: the most any of its rays takes (a block lasts as long
/// as its warps' longest segment).
inline double rays_item_steps(const Parallel2dView& v, index_t item)
{
    const RaysItem at = rays_item(v, item);
    double most = 0.0;
    for (int i = 0; i < ray_views; ++i) {
        const index_t view = at.view_group * ray_views + i;
        if (view >= v.views) break;
        for (int j = 0; j < ray_bins; ++j) {
            const index_t bin = at.bin_group * ray_bins + j;
            if (bin >= v.bins) break;
            most = std::max(most, ray_steps_estimate(v, view, bin));
        }
    }
    return most;
}

/// The items in the order to hand them out: the most steps first, ties in
/// item order. `v` with host pointers.
inline std::vector<std::int32_t> rays_order(const Parallel2dView& v)
{
    const index_t items = ray_blocks(v);
    std::vector<double> steps(static_cast<std::size_t>(items));
    for (index_t item = 0; item < items; ++item) steps[item] = rays_item_steps(v, item);
    std::vector<std::int32_t> order(static_cast<std::size_t>(items));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return steps[a] > steps[b]; });
    return order;
}

/// Every block's rays (ray_setup_entry's layout), block i taking the item
/// order[i], or nothing above parallel2d_table_max_bytes. `v` with host
/// pointers.
inline std::vector<RaySetup> rays_setup(const Parallel2dView& v,
                                        const std::vector<std::int32_t>& order)
{
    if (order.size() * ray_lanes * sizeof(RaySetup) > parallel2d_table_max_bytes) return {};
    std::vector<RaySetup> rays(order.size() * ray_lanes);
    for (std::size_t i = 0; i < order.size(); ++i) {
        const RaysItem at = rays_item(v, order[i]);
        for (int lane = 0; lane < ray_lanes; ++lane) {
            rays[ray_setup_entry(static_cast<index_t>(i), lane)] = ray_setup(v, at, lane);
        }
    }
    return rays;
}

}  // namespace recon::kernels
