#pragma once
// Parallel-beam (Joseph's method) products on the GPU, rows generated on the
// fly: A x ray-driven, Aᵀ y pixel-driven (a gather, no atomics). Both use the
// weights of rows.hpp's generator, from its own geometry (view_geometry,
// ray_base, crossing: products and sums rounded one by one, on the host and
// the device alike), so A and Aᵀ stay matched and agree with the CPU backend
// up to the order of the sums (one frame's mirrored Aᵀ, below: up to the
// last bits of the reflected pixels' weights as well).
//
// Notation (rows.hpp): a view steps along its `major` image axis (y when
// |cos| >= |sin|, else x); at major index k the ray of bin b crosses the
// minor axis at p = base_b + slope * k and gives the pixels floor(p) and
// floor(p) + 1 the weights (1 − frac) and frac, times scale = |1 / cos| (or
// |1 / sin|). Bins are |1 / cos| >= 1 apart in p, so for one (pixel, view)
// only the two bins whose crossings straddle the pixel can have a weight.
//
// Why these kernels look the way they do (ct_256: 256 x 256 pixels, 180
// views x 256 bins, H200 with 132 SMs; reasoning, to be checked against
// `recon bench`):
//
// A x, two kernels:
//  1. parallel2d_pairs_kernel writes two zero-padded "pair images" of x:
//     rows[k][i + 2] = (x[k][i], x[k][i + 1]) and the same for columns
//     (the transposed image). One 16 x 16 tile per block, transposed through
//     shared memory. ~0.25 MB in and 1 MB out per frame, from and to L2.
//  2. parallel2d_rays_kernel: one thread per ray, the lanes of a warp on
//     neighbouring bins (8 bins of 4 neighbouring views; first 32 bins of
//     one view). At a step k those lanes read neighbouring entries of one
//     row of the pair image that runs along the view's minor axis (the
//     transposed one for views that step along x): one 8-byte load per step
//     for both pixels, ~1.7 cache lines per warp and step (~3 for 32 bins of
//     one view), where one thread (or one warp) per ray reading x directly
//     touches 32 cache lines per load for half of the views (the previous
//     kernel: 44 µs, L1-wavefront bound). The zero padding lets every step
//     run without bounds tests; the k range of each ray is clipped to the
//     image once per ray. Each ray is split into 4 segments (4 warps) so
//     that ~44 warps per SM hide the L1 latency; no integer division and no
//     float-to-int conversion in the loop (floor by the 1.5 * 2^23 trick:
//     conversions issue at 1/8 of the FP32 rate). ~16 instructions per
//     (ray, step): ~9M steps -> ~4.5M warp instructions over 528
//     schedulers -> ~4-5 µs, plus ~1-2 µs for the pair images and one more
//     launch. A block takes 4 neighbouring views (first one view of 32
//     bins: ncu, H100, 2026-11-22, found the kernel at 19.6 µs and L2-bound,
//     60 % of L2 throughput, each view reading every line of the pair image
//     from L2, ~90 MB per product); views a degree apart cross nearly the
//     same pixels at each step, so their lanes share lines (L2 at 22 %, but
//     the same 19.4 µs: the kernel waits on L1 latency; walking each segment
//     as two interleaved halves, two chains of loads per thread, made it
//     slower: 23.1 µs; so did 5 segments per ray, more warps per SM,
//     occupancy 61 -> 76 %: 22.1 µs). Every block runs at once, so the
//     kernel lasts as long as its busiest SM: the blocks are handed out
//     longest first from a table the system makes once (parallel2d_rays.hpp;
//     with blocks of 4 x 32 rays in centre-out order ncu counted the SMs
//     active in 66-77 % of the kernel's cycles).
//
// Aᵀ y, one kernel (parallel2d_adjoint_kernel): a block owns a 16 x 16
// pixel tile, warp pairs split the views (summed in shared memory at the
// end), each thread 2 x 2 pixels: 12 pairs for one frame, 8 for 4 frames
// (4 pairs left ct_256's 256 tiles ~16 warps per SM to hide latency with:
// 24 µs, against 21 µs with 8 on an H100; 12 took ct_256 with TV from 16.6
// to 16.2-16.3 ms).
// Per chunk of views the block stages, for the bins per view whose rays
// can touch the tile (≤ 25 in rows of 32), (y · scale, base) in shared
// memory. Per (pixel, view) a thread computes the approximate bin
// position of the pixel (two FMAs, shared by the two pixels of a row), takes
// the two straddling bins by the same 1.5 * 2^23 trick (their table index
// straight from the float's bits), and evaluates both with the exact
// forward formula: max(0, 1 − |p − j|) is the forward weight of pixel j.
// ~13 instructions and 2 shared loads per (pixel, view), plus per-view
// work shared by 4 pixels: 11.8M (pixel, view) pairs -> ~6.5M warp
// instructions -> ~6-7 µs (the previous kernel tested 3-4 candidate bins
// per (pixel, view) with a branch each: 138 µs).
// Mirrored (one frame, the detector centred, nx a multiple of 32 and ny of
// 16: ct_256): the reflection through the image's centre maps pixel
// (ix, iy) to (nx − 1 − ix, ny − 1 − iy) and, in the same view, the ray of
// bin b onto the ray of bin bins − 1 − b, so a weight computed once serves
// a pixel and its reflection: a block owns a tile of the left half and its
// reflected tile, stages each view's window of bins and the reflected
// window (y only), and adds the reflected pixel's two products with two
// more shared loads and FMAs: ~17 instead of ~30 instructions per (pixel,
// view), in 128 blocks of 16 groups, one per SM (64 registers). rows.hpp's
// float arithmetic may round the reflected crossing apart in its last bits,
// so the GPU's Aᵀ matches its A, and the CPU's, within rounding there.
//
// The solver's iteration around them (cgnr_step_normal_dots,
// cgnr_step_update_direction, or both as cgnr_step_one_pass): the adjoint
// runs the dot step in its epilogue (ReduceEpilogue), the direction step
// keeps the pair images of d (parallel2d_direction_kernel), update, β and
// direction are one cooperative launch (parallel2d_step_kernel), and for
// one frame the adjoint, launched cooperatively, runs the dot step and
// that step itself with one grid sync (StepEpilogue): ct_256 is two
// kernels and one grid sync per iteration. ncu (H100, 2026-11-22, before
// the last): rays 16.0 µs, the adjoint with the epilogue ~21 µs (17.1
// alone), the cooperative step 7.2 µs. An iteration that a residual
// replacement starts (cgnr_step_replacement) is three launches: x_k's pair
// images, the rays of d and x_k in one walk (A d, A x_k − b), and the
// one-pass step's adjoint, which back-projects r first (StepEpilogue's
// Refresh).

#include <cuda_runtime.h>

#include <cooperative_groups.h>

#include <type_traits>

#include "cgnr_ops.cuh"
#include "cooperative_step.cuh"
#include "frame_reduce.cuh"
#include "grid_barrier.cuh"
#include "kernels/parallel2d_adjoint.hpp"
#include "kernels/parallel2d_rays.hpp"
#include "kernels/rows.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda::p2 {

namespace cg = cooperative_groups;

// --- the kernels' own float and pointer helpers (rows.hpp has the shared ones) -----

/// The forward weight of minor pixel j for a crossing at p: 1 − |p − j| for
/// j = floor(p) (bit for bit 1 − frac) and for j = floor(p) + 1 (frac; bit
/// for bit when p >= 1, else within one rounding), 0 for any other j.
RECON_HD float pixel_weight(float p, float jf)
{
    return fmaxf(0.0f, sub_rn(1.0f, fabsf(sub_rn(p, jf))));
}

/// `p`, with the compiler kept from seeing how it was formed. An address
/// made of a pointer the compiler cannot take apart and a 32-bit index is
/// one wide multiply-add (IMAD.WIDE). Left to itself, nvcc kept the rays
/// kernel's frame and axis offsets as a 64-bit index beside the parameter
/// and spent five integer instructions on each step's load address: the
/// loop of 4 steps was 71 instructions, now 58 (SASS, sm_90). The adjoint's
/// staging of y takes the same form.
template <class T>
__device__ __forceinline__ const T* opaque_pointer(const T* p)
{
    asm("" : "+l"(p));
    return p;
}

// --- A x ---------------------------------------------------------------------------

/// One step of Joseph's method along a ray: the weights of the minor pixels
/// floor(p) and floor(p) + 1 at p = crossing(base, slope, kf), and where the
/// first sits in a zero-padded line whose pixel i is entry i + 2: `offset`
/// is that line's start + 2 − bits(magic), so the entry is offset + bits(m).
/// floor(p) is one rounded-down add (floor_plus_magic); p − 0.5 rounded to
/// nearest would take two. At an integer p the weight 1 is w0, as in
/// rows.hpp.
struct RayStep {
    float w0, w1;
    index_t entry;
};

RECON_HD RayStep ray_step(float base, float slope, float kf, index_t offset)
{
    const float p = crossing(base, slope, kf);
    const float mp = floor_plus_magic(p);           // bits: magic's + floor(p)
    const float w1 = sub_rn(p, sub_rn(mp, magic));  // p − floor(p), exact: rows.hpp's w1
    return {sub_rn(1.0f, w1), w1, offset + float_bits(mp)};
}


/// Floats of one frame's pair images: rows ny x (nx + 3), then columns
/// nx x (ny + 3), float2 each. Entry i + 2 of a line holds the pixels i and
/// i + 1 of that line (zero outside the image), for i in [−2, n_minor].
RECON_HD size_type pair_frame_size(const Parallel2dView& v)
{
    return static_cast<size_type>(v.ny) * (v.nx + 3) + static_cast<size_type>(v.nx) * (v.ny + 3);
}

// 16 x 16 tiles: 256 blocks for a 256 x 256 image. (32 x 32 tiles gave 64
// blocks, half the SMs of an H100 idle: 4.5 µs per call for 1.5 MB.)
constexpr int pair_tile = 16;

/// A tile of an image with its one-pixel halo to the right and below (zero
/// outside the image): what a tile's entries of the pair images are made of.
using PairTile = float[pair_tile + 1][pair_tile + 1];  // odd row stride: no bank conflicts

/// Halo pixel r (0 <= r < 2 · pair_tile) of the tile with corner (x0, y0):
/// its right neighbour column's row r (r < pair_tile), else its lower
/// neighbour row's column r − pair_tile. It may lie outside the image.
RECON_HD void pair_tile_halo(int r, index_t x0, index_t y0, index_t& hx, index_t& hy)
{
    const bool column = r < pair_tile;
    hx = column ? x0 + pair_tile : x0 + (r - pair_tile);
    hy = column ? y0 + r : y0 + pair_tile;
}

/// Writes the tile's entries of one frame's pair images (`rows`, then the
/// columns after them) from `tile`; a block of pair_tile x pair_tile
/// threads, after a barrier that follows the tile's last store.
__device__ __forceinline__ void write_pairs(const Parallel2dView& v, const PairTile& tile,
                                            index_t x0, index_t y0, float2* __restrict__ rows)
{
    const index_t nx = v.nx, ny = v.ny;
    float2* cols = rows + static_cast<size_type>(ny) * (nx + 3);
    const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
    const index_t row_width = nx + 3, col_width = ny + 3;
    const float2 zero = make_float2(0.0f, 0.0f);
    // Rows: lanes along x.
    {
        const int r = ty;
        const index_t gy = y0 + r, gx = x0 + tx;
        if (gy < ny) {
            float2* line = rows + static_cast<size_type>(gy) * row_width;
            if (gx < nx) line[gx + 2] = make_float2(tile[r][tx], tile[r][tx + 1]);
            if (gx == nx - 1) line[nx + 2] = zero;
            if (x0 == 0 && tx == 0) {
                line[0] = zero;
                line[1] = make_float2(0.0f, tile[r][0]);
            }
        }
    }
    // Columns: lanes along y (consecutive addresses of the transposed line).
    {
        const int c = ty;
        const index_t gx = x0 + c, gy = y0 + tx;
        if (gx < nx) {
            float2* line = cols + static_cast<size_type>(gx) * col_width;
            if (gy < ny) line[gy + 2] = make_float2(tile[tx][c], tile[tx + 1][c]);
            if (gy == ny - 1) line[ny + 2] = zero;
            if (y0 == 0 && tx == 0) {
                line[0] = zero;
                line[1] = make_float2(0.0f, tile[0][c]);
            }
        }
    }
}

/// The pair images of `frames` frames (blockIdx.z) of x; a block of
/// pair_tile x pair_tile threads transposes one tile through shared memory
/// (with a one-pixel halo).
__global__ void __launch_bounds__(pair_tile * pair_tile)
    parallel2d_pairs_kernel(Parallel2dView v, const float* __restrict__ x, float2* __restrict__ pairs)
{
    __shared__ PairTile tile;
    const index_t nx = v.nx, ny = v.ny;
    const index_t x0 = blockIdx.x * pair_tile, y0 = blockIdx.y * pair_tile;
    const float* xf = x + static_cast<size_type>(blockIdx.z) * nx * ny;
    constexpr int threads = pair_tile * pair_tile;
    for (int e = threadIdx.y * pair_tile + threadIdx.x; e < (pair_tile + 1) * (pair_tile + 1);
         e += threads) {
        const int r = e / (pair_tile + 1), c = e - r * (pair_tile + 1);
        const index_t gy = y0 + r, gx = x0 + c;
        tile[r][c] = gy < ny && gx < nx ? xf[static_cast<size_type>(gy) * nx + gx] : 0.0f;
    }
    __syncthreads();
    write_pairs(v, tile, x0, y0, pairs + static_cast<size_type>(blockIdx.z) * pair_frame_size(v));
}

/// d = −g + β d over the calling block's tile (blockIdx.x, blockIdx.y) of
/// one frame, and the tile's entries of the pair images of d from the new
/// values (the block's pair_tile x pair_tile threads, every one). The halo
/// to the right and below is d's next value there, formed here from g and
/// the halo's old d, which is read from this tile's own entries of the old
/// pair images (the second pixel of its last column's and last row's
/// entries): the neighbouring tile may already have moved d there.
__device__ __forceinline__ void move_direction_tile(const Parallel2dView& v, int frame,
                                                    float beta, const float* __restrict__ g,
                                                    float* __restrict__ d,
                                                    float2* __restrict__ pairs)
{
    __shared__ PairTile tile;
    const index_t nx = v.nx, ny = v.ny;
    const size_type n = static_cast<size_type>(nx) * ny;
    const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
    const index_t x0 = blockIdx.x * pair_tile, y0 = blockIdx.y * pair_tile;
    const index_t ix = x0 + tx, iy = y0 + ty;
    const float* gf = g + frame * n;
    float* df = d + frame * n;
    float2* rows = pairs + static_cast<size_type>(frame) * pair_frame_size(v);
    const float2* cols = rows + static_cast<size_type>(ny) * (nx + 3);
    float own = 0.0f;
    if (ix < nx && iy < ny) {
        const size_type k = static_cast<size_type>(iy) * nx + ix;
        own = direction_at(gf[k], beta, df[k]);
        df[k] = own;
    }
    tile[ty][tx] = own;
    const int t = ty * pair_tile + tx;
    if (t < 2 * pair_tile) {
        index_t hx = 0, hy = 0;
        pair_tile_halo(t, x0, y0, hx, hy);
        float next = 0.0f;
        if (hx < nx && hy < ny) {
            // the halo column's old d from its row's entries, the halo row's from its column's
            const bool in_column = hx - x0 == pair_tile;
            const float old = in_column ? rows[static_cast<size_type>(hy) * (nx + 3) + hx + 1].y
                                        : cols[static_cast<size_type>(hx) * (ny + 3) + hy + 1].y;
            next = direction_at(gf[static_cast<size_type>(hy) * nx + hx], beta, old);
        }
        tile[hy - y0][hx - x0] = next;
    }
    __syncthreads();  // every old entry this tile reads is read before it is written
    write_pairs(v, tile, x0, y0, rows);
}

/// The direction step d = −g + β d of the frames still running (blockIdx.z)
/// that keeps their pair images up to date as well (move_direction_tile), a
/// tile per block, so that the rays need not make them every iteration.
/// WithState: in the same pass the state of every frame from prepare.p, as
/// regularizer_prepare.
template <bool WithState>
__global__ void __launch_bounds__(pair_tile * pair_tile)
    parallel2d_direction_kernel(Parallel2dView v, int batch, const float* __restrict__ g,
                                float* __restrict__ d, float2* __restrict__ pairs,
                                const CgnrScalars* __restrict__ s, RegularizerPrepare prepare)
{
    const int frame = blockIdx.z;
    const index_t nx = v.nx, ny = v.ny;
    const size_type n = static_cast<size_type>(nx) * ny;
    const index_t ix = blockIdx.x * pair_tile + threadIdx.x;
    const index_t iy = blockIdx.y * pair_tile + threadIdx.y;
    const bool inside = ix < nx && iy < ny;
    if constexpr (WithState) {
        if (inside) {
            terms_prepare(prepare.terms, prepare.state.data, batch, frame,
                          prepare.p.data + frame * n, prepare.grid, ix, iy);
        }
    }
    if (s[frame].status != SolveStatus::running) return;  // uniform over the block
    move_direction_tile(v, frame, static_cast<float>(s[frame].beta), g, d, pairs);
}

/// cgnr_step_update_beta and then the direction step of
/// parallel2d_direction_kernel in one cooperative launch, a tile of one
/// frame (blockIdx.z) per block, for frames whose pair images are kept:
/// (1) α from the frame's scalars (thread 0, shared); x, h and g of the
/// tile's pixels; the block's sums of gᵀe and ‖g‖² into partials; (2) a
/// grid-wide sync; (3) every block sums its frame's partials in one fixed
/// order (so all blocks get the same bits) and runs cgnr_scalars_alpha and
/// cgnr_scalars_end on the copy of the scalars it took before the sync (the
/// first tile stores the result), then moves d and its pair images with β,
/// the halo's g being the neighbours' new one; WithState: the state of every
/// frame from the new x. The same operations as the two launches it
/// replaces, and one grid sync instead of a kernel boundary.
template <bool WithState>
__global__ void __launch_bounds__(pair_tile * pair_tile)
    parallel2d_step_kernel(Parallel2dView v, CgnrParams params, int batch, StepVectors w,
                           CgnrScalars* s, RegularizerPrepare prepare, double2* partials)
{
    constexpr int threads = pair_tile * pair_tile;
    constexpr int warps = threads / 32;
    __shared__ CgnrScalars before;  // the frame's scalars at the start
    __shared__ float alpha, beta;
    __shared__ bool steps, moves;
    const int frame = blockIdx.z;
    const int t = threadIdx.y * pair_tile + threadIdx.x;
    const index_t nx = v.nx, ny = v.ny;
    const size_type n = static_cast<size_type>(nx) * ny;
    const index_t ix = blockIdx.x * pair_tile + threadIdx.x;
    const index_t iy = blockIdx.y * pair_tile + threadIdx.y;
    const bool inside = ix < nx && iy < ny;
    const size_type k = frame * n + static_cast<size_type>(iy) * nx + ix;
    const unsigned tiles = gridDim.x * gridDim.y;
    const unsigned tile_index = blockIdx.y * gridDim.x + blockIdx.x;

    // (1) α; x, h, g; this tile's gᵀe and ‖g‖²
    if (t == 0) cooperative_alpha(s, frame, before, steps, alpha);
    __syncthreads();
    double2 sum{0.0, 0.0};
    if (steps && inside) {
        const double gd = update_at(k, alpha, w.d, w.u, w.e, w.fx, w.x, w.h, w.g);
        sum = {gd * w.e[k], gd * gd};
    }
    store_block_sum<warps>(sum, t, partials + static_cast<size_type>(frame) * tiles + tile_index);

    // (2)
    cooperative_groups::this_grid().sync();

    // (3) β and the stop tests, every block alike
    if (t < 32) {
        cooperative_beta(t, partials + static_cast<size_type>(frame) * tiles, tiles, before,
                         params, tile_index == 0, s + frame, moves, beta);
    }
    if constexpr (WithState) {
        if (inside) {
            terms_prepare(prepare.terms, prepare.state.data, batch, frame,
                          prepare.p.data + frame * n, prepare.grid, ix, iy);
        }
    }
    __syncthreads();
    if (!moves) return;  // uniform over the block

    // d = −g + β d and its pair images; the halo's g is the neighbours' new one
    move_direction_tile(v, frame, beta, w.g, w.d, w.pairs);
}

/// y[b][ray] = Σ_k weights · x[b] for BT frames, from their pair images
/// (`pairs`, frame stride pair_frame_size). A block takes the rays of
/// ray_views neighbouring views x ray_bins neighbouring bins, a warp's lanes
/// (parallel2d_rays.hpp, which also orders the blocks), and splits each
/// ray's steps over ray_segments warps. Views one degree apart cross nearly
/// the same pixels at each step, so a warp's loads of a step share cache
/// lines: ~1.7 lines per warp and step where 32 bins of one view touched
/// ~3.0 (counted over ct_256's steps; ncu, H100 at 1.56 GHz: L1 sectors
/// 4.76M -> 2.80M, the kernel 18.6 -> 17.4 µs; 16 bins of 2 views measured
/// level with 32 of one). One view per block read every line from L2 once
/// per view (~90 MB per product for ct_256, 20 µs on an H100). With `sub`:
/// r = A x − sub, sums kept in Acc. Twelve blocks per SM, which ct_256's
/// 1,440 blocks need at once, leave ptxas 40 registers: with 32 it kept two
/// loads in flight per thread, and a system of few views (each SM one or
/// two blocks) waited on the L2 for every second step. A thread takes its
/// ray's constants from the system's table (v.rays) where it has one:
/// Tabled, where the caller found one, the kernel is compiled without the
/// code that makes them (ct_256 with TV, with the same for the one-pass
/// adjoint: −0.06 ms a solve, the code an iteration runs the same).
/// WithResidual (one frame, a residual replacement's iteration): the same
/// walk also gives `residual.r` = A x − b from x's pair images, its sums in
/// double as the `sub` form's (the same operations, so the same bits), where
/// the two products apart walked every ray twice.
struct ResidualRays {
    const float2* x_pairs;  // one frame's pair images of x
    const float* b;
    float* r;
};

template <int BT, class Acc, bool Tabled, bool WithResidual = false>
__global__ void __launch_bounds__(32 * ray_segments, 12)
    parallel2d_rays_kernel(Parallel2dView v, const float2* __restrict__ pairs,
                           const float* __restrict__ sub, float* __restrict__ y,
                           ResidualRays residual = {})
{
    static_assert(!WithResidual || BT == 1);
    __shared__ Acc partial[ray_segments][BT][32];
    __shared__ double residual_partial[WithResidual ? ray_segments : 1][32];
    const int lane = threadIdx.x % 32;
    const int segment = threadIdx.x / 32;
    RaySetup ray;
    if constexpr (Tabled) {
        ray = v.rays[ray_setup_entry(static_cast<index_t>(blockIdx.x), lane)];
    } else {
        ray = ray_setup(v, rays_block(v, blockIdx.x), lane);
    }
    const bool active = ray.row >= 0;
    Acc acc[BT];
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[b] = Acc{0};
    double racc = 0.0;  // WithResidual: A x of the ray
    if (active) {
        const index_t per = (ray.end - ray.begin + ray_segments - 1) / ray_segments;
        const index_t k0 = ray.begin + segment * per;
        const index_t k1 = min(k0 + per, static_cast<index_t>(ray.end));
        const index_t stride = ray.line_stride;
        const size_type frame = pair_frame_size(v);
        const size_type axis = ray.columns != 0 ? static_cast<size_type>(v.ny) * (v.nx + 3) : 0;
        const float2* image[BT];
#pragma unroll
        for (int b = 0; b < BT; ++b) {
            image[b] = opaque_pointer(pairs + static_cast<size_type>(b) * frame + axis);
        }
        const float2* x_image = WithResidual ? opaque_pointer(residual.x_pairs + axis) : nullptr;
        index_t offset = k0 * stride + 2 - float_bits(magic);
        float kf = static_cast<float>(k0);
#pragma unroll 4
        for (index_t k = k0; k < k1; ++k) {
            const RayStep step = ray_step(ray.base, ray.slope, kf, offset);
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                const float2 xx = __ldg(image[b] + step.entry);
                acc[b] += static_cast<Acc>(step.w0) * static_cast<Acc>(xx.x);
                acc[b] += static_cast<Acc>(step.w1) * static_cast<Acc>(xx.y);
            }
            if constexpr (WithResidual) {
                const float2 xx = __ldg(x_image + step.entry);
                racc += static_cast<double>(step.w0) * static_cast<double>(xx.x);
                racc += static_cast<double>(step.w1) * static_cast<double>(xx.y);
            }
            kf += 1.0f;
            offset += stride;
        }
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[b] *= static_cast<Acc>(ray.scale);
        racc *= static_cast<double>(ray.scale);
    }
#pragma unroll
    for (int b = 0; b < BT; ++b) partial[segment][b][lane] = acc[b];
    if constexpr (WithResidual) residual_partial[segment][lane] = racc;
    __syncthreads();
    if (segment == 0 && active) {
#pragma unroll
        for (int b = 0; b < BT; ++b) {
            Acc sum = partial[0][b][lane];
            for (int s = 1; s < ray_segments; ++s) sum += partial[s][b][lane];
            const size_type k = static_cast<size_type>(b) * (v.views * v.bins) + ray.row;
            y[k] = static_cast<float>(sub != nullptr ? sum - static_cast<Acc>(__ldg(sub + k)) : sum);
        }
        if constexpr (WithResidual) {
            double sum = residual_partial[0][lane];
            for (int s = 1; s < ray_segments; ++s) sum += residual_partial[s][lane];
            const double b = __ldg(residual.b + ray.row);
            residual.r[ray.row] = static_cast<float>(sum - b);
        }
    }
}

// --- A x through staged image lines (clusters, sm_90) -------------------------------
//
// parallel2d_lines_kernel: the rays read the image from shared memory. A
// cluster of S blocks takes a group of neighbouring views, all their bins
// (one thread per ray); block s stages the image lines [s K, s K + K) of the
// views' major axis (rows, or columns transposed) once and walks the rays
// of the group over them in rounds of up to 4 views; the S partial sums of
// a ray are added in block order through distributed shared memory, so the
// result does not depend on timing. The pair-image kernel waits on L1
// misses (a new image line at every step); a staged line is read by all the
// rays of the block's views. What it costs besides the walk (~15
// instructions per ray and step): staging K lines per block, and each
// ray's setup once per segment (the view's constants once per block).
// With one round per block, ncu on ct_256 (H100, 2026-11-22) counted for
// one frame 11.5M warp instructions, 5.3M of them the walk, ~3M staging,
// ~1.5M setup: 28 µs against 24 µs for the pair images. Rounds share the
// staging between views; the plan takes the fewest rounds that let every
// block run at once, one per SM, so that no SM waits for a second wave:
// ct_256 (180 views) takes 3 rounds of 4 views, 15 clusters of 8. A x
// (H100, 2026-11-22, the same run): 4 frames 40 µs against 52 µs with one
// round of 4 views and 84 µs for the pair images; one frame 25.0 µs against
// 25.7 µs for the pair images, which one frame keeps. 2 or 4 rounds (184
// or 96 blocks) took 48–51 µs for 4 frames and 28–29 µs for one.

/// Most blocks per cluster (the portable cluster size).
constexpr int lines_max_segments = 8;
/// Most rounds of views a block walks over the lines it staged once.
constexpr int lines_max_rounds = 4;
/// Most views of one block (threads take at most 4 views per round).
constexpr int lines_max_views = 4 * lines_max_rounds;

/// A staged image entry: one float, or the 4 frames of a pixel together.
template <int BT>
using LineValue = std::conditional_t<BT == 1, float, float4>;

/// How parallel2d_lines_kernel covers a system (system_kernels.cu picks it).
struct LinesPlan {
    int views_per_round = 0;   // neighbouring views walked at once, one thread per ray
    int rounds = 0;            // rounds of views per cluster, over the same staged lines
    int threads = 0;           // views_per_round * bins, rounded up to a warp
    int segments = 0;          // blocks per cluster, one per range of lines
    index_t lines = 0;         // image lines per block
    index_t line_stride = 0;   // staged entries per line: max(nx, ny) + 4, odd
    std::size_t bytes = 0;     // dynamic shared memory per block
};

/// A view's constants, computed once per block for all its rays.
struct LinesView {
    ViewGeometry g;
    float inv_slope;  // 1 / slope, for ray_span
};

template <int BT>
__device__ __forceinline__ LineValue<BT> load_pixel(const float* __restrict__ x, size_type frame,
                                                    size_type at)
{
    if constexpr (BT == 1) {
        return __ldg(x + at);
    } else {
        return make_float4(__ldg(x + at), __ldg(x + frame + at), __ldg(x + 2 * frame + at),
                           __ldg(x + 3 * frame + at));
    }
}

/// Stages lines [k0, k0 + count) of one axis: entry i + 2 of staged line kk
/// is pixel i of image line k0 + kk (a row when StepY, else a column), zero
/// for i outside [0, n_minor); entries [0, n_minor + 4) are written.
template <int BT, bool StepY>
__device__ __forceinline__ void stage_lines(const Parallel2dView& v, const float* __restrict__ x,
                                            index_t k0, index_t count, index_t stride,
                                            LineValue<BT>* staged)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const size_type frame = static_cast<size_type>(v.nx) * v.ny;
    const index_t n_minor = StepY ? v.nx : v.ny;
    const index_t width = n_minor + 4;
    auto value = [&](index_t kk, index_t i) {
        const index_t pixel = i - 2;
        if (pixel < 0 || pixel >= n_minor) return LineValue<BT>{};
        const size_type at = StepY ? static_cast<size_type>(k0 + kk) * v.nx + pixel
                                   : static_cast<size_type>(pixel) * v.nx + k0 + kk;
        return load_pixel<BT>(x, frame, at);
    };
    if constexpr (StepY) {
        // Lanes along a row: coalesced reads, consecutive shared entries.
        for (index_t kk = warp; kk < count; kk += warps) {
#pragma unroll 4
            for (index_t i = lane; i < width; i += 32) staged[kk * stride + i] = value(kk, i);
        }
    } else {
        // Lanes along k (consecutive addresses of an image row); the odd
        // stride spreads their shared entries over the banks.
        for (index_t i = warp; i < width; i += warps) {
#pragma unroll 2
            for (index_t kk = lane; kk < count; kk += 32) staged[kk * stride + i] = value(kk, i);
        }
    }
}

/// Walks one ray over the staged lines [kb, ke) (k0: the first staged line).
template <int BT>
__device__ __forceinline__ void walk_staged(const LineValue<BT>* staged, index_t stride,
                                            float base, float slope, index_t k0, index_t kb,
                                            index_t ke, float (&acc)[BT])
{
    index_t offset = (kb - k0) * stride + 2 - float_bits(magic);
    float kf = static_cast<float>(kb);
#pragma unroll 4
    for (index_t k = kb; k < ke; ++k) {
        const RayStep step = ray_step(base, slope, kf, offset);
        const LineValue<BT> a = staged[step.entry];
        const LineValue<BT> c = staged[step.entry + 1];
        if constexpr (BT == 1) {
            acc[0] += step.w0 * a;
            acc[0] += step.w1 * c;
        } else {
            const float av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                acc[b] += step.w0 * av[b];
                acc[b] += step.w1 * cv[b];
            }
        }
        kf += 1.0f;
        offset += stride;
    }
}

/// y[b][ray] = Σ_k weights · x[b] for BT frames (frame-major x, frame
/// stride nx * ny). Grid (segments, view groups), clusters of
/// (segments, 1, 1); a view group is `rounds` rounds of `views_per_round`
/// views; see above.
template <int BT>
__global__ void __launch_bounds__(1024)
    parallel2d_lines_kernel(Parallel2dView v, int views_per_round, int rounds, index_t lines,
                            index_t stride, const float* __restrict__ x, float* __restrict__ y)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) unsigned char line_memory[];
    __shared__ LinesView views[lines_max_views];
    auto* staged = reinterpret_cast<LineValue<BT>*>(line_memory);
    const int t = threadIdx.x;
    const int group = views_per_round * rounds;
    const index_t first_view = static_cast<index_t>(blockIdx.y) * group;
    const int group_views = static_cast<int>(min(static_cast<index_t>(group), v.views - first_view));
    if (t < group_views) {
        views[t].g = view_geometry(v, first_view + t);
        views[t].inv_slope = 1.0f / views[t].g.slope;
    }
    const int slot = static_cast<int>(t / v.bins);  // the thread's view within a round
    const index_t bin = t - static_cast<index_t>(slot) * v.bins;
    const index_t k0 = static_cast<index_t>(blockIdx.x) * lines;
    float acc[lines_max_rounds][BT];
#pragma unroll
    for (int r = 0; r < lines_max_rounds; ++r) {
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[r][b] = 0.0f;
    }
    __syncthreads();
    // Views of both axes can share a group (near 45 and 135 degrees): the
    // lines of each axis in turn, skipped where no view of the group needs them.
#pragma unroll
    for (int axis = 0; axis < 2; ++axis) {
        const bool step_y = axis == 0;
        bool needed = false;
        for (int i = 0; i < group_views; ++i) needed |= views[i].g.step_y == step_y;
        if (!needed) continue;
        const index_t count = min(lines, (step_y ? v.ny : v.nx) - k0);
        if (count <= 0) continue;
        if (step_y) {
            stage_lines<BT, true>(v, x, k0, count, stride, staged);
        } else {
            stage_lines<BT, false>(v, x, k0, count, stride, staged);
        }
        __syncthreads();
        if (slot < views_per_round) {
#pragma unroll
            for (int r = 0; r < lines_max_rounds; ++r) {
                const int i = r * views_per_round + slot;
                if (r >= rounds || i >= group_views || views[i].g.step_y != step_y) continue;
                const LinesView& view = views[i];
                const float base = ray_base(v, view.g.inv, view.g.slope_c_major, view.g.c_minor, bin);
                const RaySpan span =
                    ray_span(base, view.g.slope, view.inv_slope, view.g.n_major, view.g.n_minor);
                const index_t kb = max(span.begin, k0), ke = min(span.end, k0 + count);
                walk_staged<BT>(staged, stride, base, view.g.slope, k0, kb, ke, acc[r]);
            }
        }
        __syncthreads();  // the lines are restaged or reused for the sums
    }
    // The partial sums (ray slot r * blockDim + t), then this block's share
    // of the slots summed over the cluster's blocks in block order.
    auto* partial = reinterpret_cast<float*>(line_memory);
    const int threads = static_cast<int>(blockDim.x);
#pragma unroll
    for (int r = 0; r < lines_max_rounds; ++r) {
        if (r >= rounds) continue;
        const int i = r * views_per_round + slot;
        const float scale = slot < views_per_round && i < group_views ? views[i].g.scale : 0.0f;
#pragma unroll
        for (int b = 0; b < BT; ++b) partial[(r * BT + b) * threads + t] = acc[r][b] * scale;
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int segments = static_cast<int>(cluster.num_blocks());
    const int slots = rounds * threads;
    const int share = (slots + segments - 1) / segments;
    const int lo = static_cast<int>(cluster.block_rank()) * share;
    const int hi = min(slots, lo + share);
    const size_type m = static_cast<size_type>(v.views) * v.bins;
    for (int s = lo + t; s < hi; s += threads) {
        const int r = s / threads, tt = s - r * threads;
        const int rs = static_cast<int>(tt / v.bins);
        const int i = r * views_per_round + rs;
        if (rs >= views_per_round || i >= group_views) continue;
        const size_type row = static_cast<size_type>(first_view + i) * v.bins +
                              (tt - static_cast<index_t>(rs) * v.bins);
#pragma unroll
        for (int b = 0; b < BT; ++b) {
            float sum = 0.0f;
            for (int q = 0; q < segments; ++q) {
                sum += cluster.map_shared_rank(partial, q)[(r * BT + b) * threads + tt];
            }
            y[static_cast<size_type>(b) * m + row] = sum;
        }
    }
    cluster.sync();  // no block leaves while the others read its sums
#endif
}

// --- Aᵀ y --------------------------------------------------------------------------

// adjoint_tile, adjoint_window, AdjointView and adjoint_view: parallel2d_adjoint.hpp
constexpr int adjoint_group_threads = 64;  // a view group's: a 2 x 2 pixel quad each

/// View groups per block (64 threads each, a 2 x 2 pixel quad per thread)
/// and views staged at once. A 256 x 256 image is 256 tiles, two per SM:
/// one frame's blocks of 12 groups keep 48 warps per SM in flight, 8 groups
/// 32; 4 frames take 64 registers, where 8 groups let two blocks share an
/// SM. One frame stages up to 192 views at once (ct_256's 180 in one chunk:
/// one staging and three barriers per block), 4 frames 32.
///
/// Mirrored (one frame, parallel2d_adjoint_mirrored): a block owns a tile
/// and its point reflection through the image's centre, and each weight it
/// computes serves both (below); 16 groups, one block of 1,024 threads per
/// SM.
template <int BT, bool Mirrored = false>
constexpr int adjoint_groups = Mirrored ? 16 : (BT == 1 ? 12 : 8);
template <int BT>
constexpr int adjoint_chunk = BT == 1 ? 192 : 32;

/// Tiles a block of the adjoint owns.
template <bool Mirrored>
constexpr int adjoint_block_tiles = Mirrored ? 2 : 1;

/// Threads of an adjoint block for BT frames.
template <int BT, bool Mirrored = false>
constexpr int adjoint_threads = adjoint_group_threads * adjoint_groups<BT, Mirrored>;

/// The staged bins of a chunk of views: per (view, bin) y · scale for BT
/// frames and the ray's base crossing. One frame keeps (y, base) pairs, one
/// 8-byte load per bin. Four frames keep y as one float4 per bin and the
/// bases apart: a warp's pixels read ~20 neighbouring bins, now 16- and
/// 4-byte words side by side; as 32-byte entries 60 % of the kernel's
/// shared-memory wavefronts were bank conflicts (ncu, H100, 2026-11-22).
template <int BT>
struct AdjointTable;

template <>
struct AdjointTable<1> {
    float2 entry[adjoint_chunk<1>][adjoint_window];  // (y, base)

    __device__ void store(int view, int bin, const float (&y)[1], float base)
    {
        entry[view][bin] = make_float2(y[0], base);
    }
    __device__ void load(int view, int bin, float (&y)[1], float& base) const
    {
        const float2 e = entry[view][bin];
        y[0] = e.x;
        base = e.y;
    }
};

template <>
struct AdjointTable<4> {
    float4 y[adjoint_chunk<4>][adjoint_window];
    float base[adjoint_chunk<4>][adjoint_window];

    __device__ void store(int view, int bin, const float (&v)[4], float b)
    {
        y[view][bin] = make_float4(v[0], v[1], v[2], v[3]);
        base[view][bin] = b;
    }
    __device__ void load(int view, int bin, float (&v)[4], float& b) const
    {
        const float4 e = y[view][bin];
        v[0] = e.x;
        v[1] = e.y;
        v[2] = e.z;
        v[3] = e.w;
        b = base[view][bin];
    }
};

/// The mirrored tile's staged bins of a chunk of views: y · scale of the
/// bin bins − 1 − b where the table holds bin b (one frame).
struct MirrorTable {
    float y[adjoint_chunk<1>][adjoint_window];
};

/// The view groups' sums after the view loop: per (tile, group, quad,
/// frame) the group's 64 places, then 8 floats apart, so that a warp's
/// pixels (two tile rows: 4 quads x 8 places, adjoint_pixel) fall on 32
/// banks.
constexpr int adjoint_sums_stride = adjoint_group_threads + 8;

/// Dynamic shared memory of parallel2d_adjoint_kernel<BT, ., Mirrored>: the
/// table and (Mirrored) the mirror table (after the last chunk the view
/// groups' sums in their place), then the chunk's views.
template <int BT, bool Mirrored = false>
constexpr std::size_t adjoint_table_bytes()
{
    const std::size_t sums = sizeof(float) * adjoint_groups<BT, Mirrored> * adjoint_sums_stride *
                             4 * BT * adjoint_block_tiles<Mirrored>;
    const std::size_t table = sizeof(AdjointTable<BT>) + (Mirrored ? sizeof(MirrorTable) : 0);
    return ((table > sums ? table : sums) + 15) / 16 * 16;
}

template <int BT, bool Mirrored = false>
constexpr std::size_t adjoint_shared_bytes =
    adjoint_table_bytes<BT, Mirrored>() + sizeof(AdjointView) * adjoint_chunk<BT>;

/// One frame's view groups' sums on mirrored tiles (a refreshing step's
/// first back-projection, StepEpilogue).
constexpr std::size_t refresh_sums_bytes =
    sizeof(float) * adjoint_groups<1, true> * adjoint_sums_stride * 4 * adjoint_block_tiles<true>;

/// Adds one view's weights times the staged y to the thread's 2 x 2 pixels
/// (acc[kk][jj]: major offset kk, minor offset jj) and, Mirrored, the same
/// weights times the mirror table's y to their reflections (macc).
template <int BT, bool StepY, bool Mirrored = false>
__device__ __forceinline__ void adjoint_view_pass(const AdjointView& a,
                                                  const AdjointTable<BT>& table,
                                                  const MirrorTable* mirror, int view, float fx0,
                                                  float fy0, float (&acc)[2][2][BT],
                                                  float (&macc)[2][2][BT])
{
    const float k0 = StepY ? fy0 : fx0;
    const float j0 = StepY ? fx0 : fy0;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
        const float kf = k0 + static_cast<float>(kk);
        const float sk = mul_rn(a.slope, kf);
        const float uk = candidate_row(a.ku, a.u0, kf);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
            const float jf = j0 + static_cast<float>(jj);
            const float sum = candidate_sum_in_row(uk, a.cv, jf);
            const int bin = float_bits(sum) - a.kbias;
            float y0[BT], y1[BT], base0, base1;
            table.load(view, bin, y0, base0);
            table.load(view, bin + 1, y1, base1);
            const float w0 = pixel_weight(add_rn(base0, sk), jf);
            const float w1 = pixel_weight(add_rn(base1, sk), jf);
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                acc[kk][jj][b] = fmaf(w0, y0[b], acc[kk][jj][b]);
                acc[kk][jj][b] = fmaf(w1, y1[b], acc[kk][jj][b]);
            }
            if constexpr (Mirrored) {
                static_assert(BT == 1);
                macc[kk][jj][0] = fmaf(w0, mirror->y[view][bin], macc[kk][jj][0]);
                macc[kk][jj][0] = fmaf(w1, mirror->y[view][bin + 1], macc[kk][jj][0]);
            }
        }
    }
}

/// What the adjoint does with each pixel's value besides storing it:
/// nothing, or (ReduceEpilogue) op.at(frame, pixel, value) on every pixel of
/// frames first .. first + BT − 1, its two results summed per frame over the
/// image and handed to op.finish (frame_reduce_arrive). Op is a dot step of
/// cgnr_ops.cuh: the sums are made where u is, one launch fewer.
struct NoEpilogue {
    static constexpr bool whole_step = false;
};

template <class Op>
struct ReduceEpilogue {
    static constexpr bool whole_step = false;
    Op op;
    ReductionScratch scratch;
    int first;

    /// The block's sums over its pixels of frames first .. first + frames − 1
    /// (lane b of the block's first warp holds frame first + b's).
    __device__ void arrive(int frames, double2 total) const
    {
        frame_reduce_arrive(scratch, first, frames, total, blockIdx.y * gridDim.x + blockIdx.x,
                            gridDim.x * gridDim.y, op);
    }
    template <bool Mirrored>
    __device__ void after(const Parallel2dView&) const
    {
    }
};

/// The dot step and then the rest of the fused form's one-pass iteration of
/// one frame (cgnr_step_one_pass), in a cooperative launch of the mirrored
/// adjoint (its tiles are the pair images': adjoint_tile = pair_tile), with
/// one grid-wide sync. Before it, the block's pixels form u, e = u +
/// F(x_k, d) and (threads apart) fx = F(x_k, x_k), and the block stores its
/// sums of dᵀe and gᵀd and, with p = h + fx, of pᵀe, eᵀe and pᵀp (a warp's
/// five summed together). After it every block sums them in one fixed order
/// and takes α and, expanded (g_{k+1} = p + α e: cgnr_scalars_end_expanded),
/// β; then x, h, g and d of its pixels move, d through shared memory into the
/// pair images a tile line at a time (put_tiles_in_pairs), and WithState the
/// state of x_{k+1} is made from the tile's new x and its halo's, formed from
/// x_k and d_k loaded before the sync. Where the expansion cancels (for every
/// block alike: the same sums), gᵀe and ‖g‖² are summed over the new g after
/// a second sync (cooperative_beta). The same operations as the adjoint with
/// ReduceEpilogue<StepDotsAt> followed by parallel2d_step_kernel, but for the
/// order of the dot step's sums and β from the expansion. One sync where
/// there were two: ct_256 with TV 12.37–12.39 -> 12.01–12.05 ms (H200). A
/// tile per block (40 registers) spilled 108–172 bytes for it and went
/// 14.13–14.17 -> 14.71–14.77 ms, slower than its two launches (adjoint, then
/// parallel2d_step_kernel: 14.32–14.42 ms), which it takes.
/// Shape: the terms it is compiled for (stencils.hpp); the code a kernel
/// holds but does not run costs here (history v43: compiled for one TV
/// term, ct_256 with TV 0.09 ms a solve faster, the same operations).
/// Refresh (a residual replacement's iteration, cgnr_step_replacement): the
/// kernel back-projects `refresh_y` = A x_k − b first and the step takes
/// h_k = Aᵀ(A x_k − b) from those sums instead of loading w.h (a frame that
/// does not step stores it), where a launch of its own stored h for the
/// step to load: the same operations, one launch fewer.
template <bool WithState, class Shape = AnyTerms, bool Refresh = false>
struct StepEpilogue {
    static constexpr bool whole_step = true;
    static constexpr bool refreshes = Refresh;
    StepDotsAt op;  // op.fold: F(x_k, d) on base u; op.at_x: F(x_k, x_k)
    CgnrParams params;
    StepVectors w;
    RegularizerPrepare prepare;  // prepare.p is w.x (cgnr_step_one_pass sees to it)
    double2* dots;  // [block][3]: (dᵀe, gᵀd), (pᵀe, eᵀe), (pᵀp, 0)
    double2* sums;  // [block]: gᵀe and ‖g‖², where the expansion cancels
    const float* refresh_y = nullptr;  // Refresh: A x_k − b

    /// The whole step from the view groups' sums: pixel_sum(AdjointPixel)
    /// gives a pixel's u, refreshed_h (Refresh) its h_k. Every thread of the
    /// block (Threads) calls it.
    template <bool Mirrored, int Threads, class PixelSum, class RefreshedH>
    __device__ void run(const Parallel2dView& v, float* u, PixelSum&& pixel_sum,
                        RefreshedH&& refreshed_h) const;
};

/// Whether an adjoint launch with `Epilogue` back-projects the epilogue's
/// refresh_y before y (StepEpilogue's Refresh).
template <class Epilogue>
constexpr bool adjoint_refreshes()
{
    if constexpr (Epilogue::whole_step) {
        return Epilogue::refreshes;
    } else {
        return false;
    }
}

/// Dynamic shared memory an adjoint launch with `Epilogue` takes beyond
/// adjoint_shared_bytes: a refreshing step keeps the view groups' sums of
/// its first back-projection there while the second runs.
template <class Epilogue>
constexpr std::size_t adjoint_epilogue_bytes()
{
    return adjoint_refreshes<Epilogue>() ? refresh_sums_bytes : 0;
}

/// The corner of the calling adjoint block's tile `tile`: tile 0 at the
/// block's place, and (Mirrored) tile 1 its reflection through the image's
/// centre, (nx − 16 − x0, ny − 16 − y0), where nx is a multiple of 32 and ny
/// of 16 (parallel2d_adjoint_mirrored) and the blocks cover the left half.
template <bool Mirrored>
__device__ __forceinline__ void adjoint_tile_corner(const Parallel2dView& v, int tile,
                                                    index_t& x0, index_t& y0)
{
    x0 = static_cast<index_t>(blockIdx.x) * adjoint_tile;
    y0 = static_cast<index_t>(blockIdx.y) * adjoint_tile;
    if (Mirrored && tile != 0) {
        x0 = v.nx - adjoint_tile - x0;
        y0 = v.ny - adjoint_tile - y0;
    }
}

/// Item p (below 256 · tiles) of an adjoint block's pixels after the view
/// loop: tile p / 256 and, in it, the pixel (lx, ly) = (p % 16, p % 256 /
/// 16), so that a warp's 32 items are two tile rows (its loads and stores
/// of the images two runs of 64 bytes; as the view groups' 2 x 2 quads
/// they spanned four rows at every other pixel, history v44); the pixel,
/// and where the groups' sums of it lie: the thread (place) (ly / 2) * 8 +
/// lx / 2 of each group, its quad (ly % 2) * 2 + lx % 2. The reflected
/// tile's pixel (lx, ly) is the reflection of the first tile's (15 − lx,
/// 15 − ly): quad 3 − quad, place 63 − place.
struct AdjointPixel {
    int tile, from_quad, from_place;
    index_t x0, y0;  // the tile's corner
    index_t ix, iy;
};

template <bool Mirrored>
__device__ __forceinline__ AdjointPixel adjoint_pixel(const Parallel2dView& v, int p)
{
    constexpr int tile_pixels = adjoint_tile * adjoint_tile;
    constexpr int group_threads = adjoint_group_threads;
    AdjointPixel a;
    a.tile = Mirrored ? p / tile_pixels : 0;
    const int lx = p % adjoint_tile, ly = (p - a.tile * tile_pixels) / adjoint_tile;
    const int quad = (ly % 2) * 2 + lx % 2;
    const int place = (ly / 2) * 8 + lx / 2;
    adjoint_tile_corner<Mirrored>(v, a.tile, a.x0, a.y0);
    a.ix = a.x0 + lx;
    a.iy = a.y0 + ly;
    a.from_quad = a.tile == 0 ? quad : 3 - quad;
    a.from_place = a.tile == 0 ? place : group_threads - 1 - place;
    return a;
}

/// Halo pixel j of an adjoint block's tiles (0 <= j < 32 · tiles, else
/// false): tile j / 32's halo pixel j % 32 (pair_tile_halo); false where
/// it lies outside the image. `x0`, `y0`: the tile's corner.
template <bool Mirrored>
__device__ __forceinline__ bool adjoint_halo(const Parallel2dView& v, int j, int& tile,
                                             index_t& x0, index_t& y0, index_t& hx, index_t& hy)
{
    if (j < 0 || j >= 2 * adjoint_tile * adjoint_block_tiles<Mirrored>) return false;
    tile = j / (2 * adjoint_tile);
    const int r = j % (2 * adjoint_tile);
    adjoint_tile_corner<Mirrored>(v, tile, x0, y0);
    static_assert(adjoint_tile == pair_tile);
    pair_tile_halo(r, x0, y0, hx, hy);
    return hx < v.nx && hy < v.ny;
}

/// The block's tiles of one frame (no halo) into its pair images (`rows`,
/// then the columns): each pixel is the first half of its own entry and
/// the second half of the entry before it, in its row and in its column,
/// so a tile line's 16 pixels are 32 consecutive floats of the image line
/// (floats 2 x0 + 3 ... 2 x0 + 34, lane l: pixel x0 + l / 2), one warp's
/// store. The other halves of the tile's first and past-last entries are
/// the neighbours' (their blocks write them) or the edges' zeros, which
/// stay as parallel2d_pairs_kernel made them. After a
/// barrier that follows the tiles' last store; every thread of the block
/// (Threads) calls it.
/// Pixel by pixel, each column store of a warp's 8 x 4 pixels touched 8
/// lines, and their drain held the one-pass adjoint's exit: ct_256 0.4–0.5
/// ms a solve slower (history v44).
template <bool Mirrored, int Threads>
__device__ __forceinline__ void put_tiles_in_pairs(
    const Parallel2dView& v, float2* rows, const PairTile (&tiles)[adjoint_block_tiles<Mirrored>])
{
    static_assert(2 * pair_tile == 32 && adjoint_tile == pair_tile);
    constexpr int lines = adjoint_block_tiles<Mirrored> * 2 * pair_tile;  // rows, then columns
    const int lane = static_cast<int>(threadIdx.x % 32);
    const index_t nx = v.nx, ny = v.ny;
    for (int line = static_cast<int>(threadIdx.x / 32); line < lines; line += Threads / 32) {
        const int tile = line / (2 * pair_tile), r = line % pair_tile;
        const bool column = line % (2 * pair_tile) >= pair_tile;
        index_t x0 = 0, y0 = 0;
        adjoint_tile_corner<Mirrored>(v, tile, x0, y0);
        const index_t ix = column ? x0 + r : x0 + lane / 2;
        const index_t iy = column ? y0 + lane / 2 : y0 + r;
        if (ix >= nx || iy >= ny) continue;
        const float value = tiles[tile][iy - y0][ix - x0];
        float* image_line = reinterpret_cast<float*>(
            column ? rows + static_cast<size_type>(ny) * (nx + 3) +
                         static_cast<size_type>(ix) * (ny + 3)
                   : rows + static_cast<size_type>(iy) * (nx + 3));
        const index_t first = column ? y0 : x0;
        image_line[2 * first + 3 + lane] = value;
    }
}

/// x[b] = Aᵀ y[b] for BT frames, pixel-driven: block (tile x, tile y) of
/// 16 x 16 pixels, adjoint_groups<BT> view groups x 64 threads x 2 x 2
/// pixels. Two blocks per SM: at most 42 registers for one frame (768
/// threads), 64 for 4 frames (512; left free, the split table's loads took
/// 75 and one block). Mirrored (one frame): the block also owns its tile's
/// reflection through the image's centre, and each (pixel, view) weight
/// computed for the first tile serves the reflected pixel too, with the
/// bin bins − 1 − b where the pixel has bin b (the reflection maps every ray
/// of a view onto the ray of the mirrored bin of the same view); one block
/// of 16 groups per SM. Tabled: the views' constants from the system's
/// table alone (v.adjoint_views, which the caller has checked), without the
/// code that makes them where there is none (see parallel2d_rays_kernel).
template <int BT, class Epilogue, bool Mirrored = false, bool Tabled = false>
__global__ void __launch_bounds__(adjoint_threads<BT, Mirrored>, Mirrored ? 1 : 2)
    parallel2d_adjoint_kernel(Parallel2dView v, const float* __restrict__ y, float* __restrict__ x,
                              Epilogue epilogue)
{
    static_assert(!Mirrored || BT == 1);
    constexpr int chunk_views = adjoint_chunk<BT>;
    constexpr int group_threads = adjoint_group_threads;
    constexpr int groups = adjoint_groups<BT, Mirrored>;
    constexpr int block_threads = adjoint_threads<BT, Mirrored>;
    constexpr int tiles = adjoint_block_tiles<Mirrored>;
    extern __shared__ __align__(16) unsigned char adjoint_shared[];  // adjoint_shared_bytes
    unsigned char* memory = adjoint_shared;
    auto& table = *reinterpret_cast<AdjointTable<BT>*>(memory);
    auto* mirror = reinterpret_cast<MirrorTable*>(memory + sizeof(AdjointTable<BT>));  // Mirrored
    auto* views =
        reinterpret_cast<AdjointView*>(adjoint_shared + adjoint_table_bytes<BT, Mirrored>());
    const int t = threadIdx.x;
    const int group = t / group_threads;
    const int local = t - group * group_threads;
    index_t tx0 = 0, ty0 = 0;
    adjoint_tile_corner<Mirrored>(v, 0, tx0, ty0);
    const index_t ix0 = tx0 + (local % 8) * 2;
    const index_t iy0 = ty0 + (local / 8) * 2;
    const float fx0 = static_cast<float>(ix0), fy0 = static_cast<float>(iy0);
    const index_t m = v.views * v.bins;
    const index_t n = v.nx * v.ny;
    // The view groups' sums: pixel q of the block's tiles, per group.
    const auto sum_at = [&](float* sums, int tile, int gr, int quad, int b, int place) -> float& {
        return sums[(((tile * groups + gr) * 4 + quad) * BT + b) * adjoint_sums_stride + place];
    };
    // Aᵀ yy of the block's pixels, as the view groups' sums into `into`.
    const auto back_project = [&](const float* yy, float* into) {
        // Views stepping along y put (major, minor) = (y, x), the others (x, y);
        // macc: the reflected pixels (Mirrored).
        float acc_y[2][2][BT], acc_x[2][2][BT], macc_y[2][2][BT], macc_x[2][2][BT];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
                for (int b = 0; b < BT; ++b) {
                    acc_y[i][j][b] = acc_x[i][j][b] = 0.0f;
                    macc_y[i][j][b] = macc_x[i][j][b] = 0.0f;
                }
            }
        }
        for (index_t chunk = 0; chunk < v.views; chunk += chunk_views) {
            const int count =
                static_cast<int>(min(static_cast<index_t>(chunk_views), v.views - chunk));
            __syncthreads();  // the previous chunk's table is no longer read
            if (t < count) {
                if (Tabled || v.adjoint_views != nullptr) {
                    views[t] = v.adjoint_views[adjoint_views_entry(v, chunk + t, tx0, ty0)];
                } else {
                    views[t] = adjoint_view(v, chunk + t, tx0, ty0);
                }
            }
            __syncthreads();
            // A fixed number of entries per thread, unrolled, so that each
            // thread's loads of y are in flight together (ncu, H100: the wait
            // on one load at a time was 13 % of the kernel's stall samples).
            constexpr int staged_per_thread = chunk_views * adjoint_window / block_threads;
            static_assert(staged_per_thread * block_threads == chunk_views * adjoint_window);
            // Each frame's y as an opaque pointer and the rows as 32-bit indices
            // (rows_of fits index_t): one IMAD.WIDE per load address.
            const float* frame_y[BT];
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                frame_y[b] = opaque_pointer(yy + static_cast<size_type>(b) * m);
            }
#pragma unroll
            for (int j = 0; j < staged_per_thread; ++j) {
                const int e = t + j * block_threads;
                if (e >= count * adjoint_window) break;
                const int vl = e / adjoint_window;  // a shift
                const int i = e - vl * adjoint_window;
                const AdjointView& a = views[vl];
                const index_t bin = a.first_bin + i;
                // The view's scale read once, before the table's stores (after
                // them the compiler read it again from shared memory).
                const float scale = a.scale;
                const float base = ray_base(v, a.inv, a.slope_c_major, a.c_minor, bin);
                // Only the bins the tile reads, ~22 of the 32 on average. The
                // staging costs its instructions an entry more than its bytes
                // from L2 (history v52: one more load an entry made ct_256's
                // solve 0.10 ms longer from the entry's own address and 0.15 ms
                // from other sectors, half the staging's bytes again).
                const bool inside = i < a.window_bins && bin >= 0 && bin < v.bins;
                const index_t row = (chunk + vl) * v.bins;
                const index_t at = row + (inside ? bin : 0);
                float ys[BT];
#pragma unroll
                for (int b = 0; b < BT; ++b) {
                    ys[b] = inside ? __ldg(frame_y[b] + at) * scale : 0.0f;
                }
                float ym = 0.0f;  // Mirrored: the reflected bin's, loaded beside y
                if constexpr (Mirrored) {
                    const index_t mirrored = row + (inside ? v.bins - 1 - bin : 0);
                    ym = inside ? __ldg(frame_y[0] + mirrored) * scale : 0.0f;
                }
                table.store(vl, i, ys, base);
                if constexpr (Mirrored) mirror->y[vl][i] = ym;
            }
            __syncthreads();
            for (int vl = group; vl < count; vl += groups) {
                const AdjointView a = views[vl];
                if (a.window_bins == 0) continue;
                if (a.step_y != 0) {
                    adjoint_view_pass<BT, true, Mirrored>(a, table, mirror, vl, fx0, fy0, acc_y,
                                                          macc_y);
                } else {
                    adjoint_view_pass<BT, false, Mirrored>(a, table, mirror, vl, fx0, fy0, acc_x,
                                                           macc_x);
                }
            }
        }
        // Sum the groups: pixel (ix0 + dx, iy0 + dy) is acc_y[dy][dx] +
        // acc_x[dx][dy], its reflection macc_y[dy][dx] + macc_x[dx][dy].
        __syncthreads();
#pragma unroll
        for (int dy = 0; dy < 2; ++dy) {
#pragma unroll
            for (int dx = 0; dx < 2; ++dx) {
#pragma unroll
                for (int b = 0; b < BT; ++b) {
                    sum_at(into, 0, group, dy * 2 + dx, b, local) =
                        acc_y[dy][dx][b] + acc_x[dx][dy][b];
                    if constexpr (Mirrored) {
                        sum_at(into, 1, group, dy * 2 + dx, b, local) =
                            macc_y[dy][dx][b] + macc_x[dx][dy][b];
                    }
                }
            }
        }
        __syncthreads();
    };
    float* const sums = reinterpret_cast<float*>(memory);  // over the table, after its last read
    // A refreshing step's first product: h_k's sums kept after the views
    float* const refreshed =
        reinterpret_cast<float*>(adjoint_shared + adjoint_shared_bytes<BT, Mirrored>);
    if constexpr (adjoint_refreshes<Epilogue>()) back_project(epilogue.refresh_y, refreshed);
    back_project(y, sums);
    if constexpr (Epilogue::whole_step) {
        const auto pixel_of = [&](float* from) {
            return [&, from](const AdjointPixel& at) {
                float sum = 0.0f;
                for (int gr = 0; gr < groups; ++gr) {
                    sum += sum_at(from, at.tile, gr, at.from_quad, 0, at.from_place);
                }
                return sum;
            };
        };
        epilogue.template run<Mirrored, block_threads>(v, x, pixel_of(sums), pixel_of(refreshed));
        return;
    }
    // One (pixel, frame) per thread and pass: pixel q = (dy * 2 + dx) * 64 +
    // local of tile k is the block's pixel k * 256 + q, frame item / (256 *
    // tiles); the groups summed in their order. An epilogue's work aside
    // from u (op.aside) goes to the threads that have no pixel (one frame:
    // half of them) as items after these; with no such threads, the
    // pixel's thread does it.
    constexpr int tile_pixels = adjoint_tile * adjoint_tile;
    constexpr int frame_items = tile_pixels * tiles;  // a frame's pixels of the block
    constexpr bool reduces = !std::is_same_v<Epilogue, NoEpilogue> && !Epilogue::whole_step;
    constexpr int main_items = frame_items * BT;
    constexpr bool aside_apart = reduces && 2 * main_items <= block_threads;
    constexpr int items = aside_apart ? 2 * main_items : main_items;
    constexpr int passes = (items + block_threads - 1) / block_threads;
    double2 part[passes];
#pragma unroll
    for (int j = 0; j < passes; ++j) part[j] = double2{0.0, 0.0};
#pragma unroll
    for (int j = 0; j < passes; ++j) {
        int item = t + j * block_threads;
        if (item >= items) break;
        const bool aside = item >= main_items;
        if (aside) item -= main_items;
        const int b = item / frame_items;
        const AdjointPixel at = adjoint_pixel<Mirrored>(v, item - b * frame_items);
        if (at.ix >= v.nx || at.iy >= v.ny) continue;
        const size_type i = static_cast<size_type>(at.iy) * v.nx + at.ix;
        if (aside) {
            if constexpr (reduces) epilogue.op.aside(epilogue.first + b, i);
            continue;
        }
        float sum = 0.0f;
        for (int gr = 0; gr < groups; ++gr) {
            sum += sum_at(sums, at.tile, gr, at.from_quad, b, at.from_place);
        }
        x[static_cast<size_type>(b) * n + i] = sum;
        if constexpr (reduces) {
            if constexpr (!aside_apart) epilogue.op.aside(epilogue.first + b, i);
            part[j] = epilogue.op.at(epilogue.first + b, i, sum);
        }
    }
    if constexpr (reduces) {
        // A warp's items are one frame's (or all aside, summing zeros);
        // frame f's are frame_items / 32 warps from item f * frame_items on.
        constexpr int warps = block_threads / 32;
        __shared__ double2 warp_sums[passes][warps];
#pragma unroll
        for (int j = 0; j < passes; ++j) {
            for (int offset = 16; offset > 0; offset /= 2) {
                part[j].x += __shfl_down_sync(0xffffffffu, part[j].x, offset);
                part[j].y += __shfl_down_sync(0xffffffffu, part[j].y, offset);
            }
            if (t % 32 == 0) warp_sums[j][t / 32] = part[j];
        }
        __syncthreads();
        if (t < 32) {
            double2 total{0.0, 0.0};
            if (t < BT) {
                constexpr int frame_warps = frame_items / 32;
                const int first_item = t * frame_items;
                const int j = first_item / block_threads;
                const int w0 = (first_item - j * block_threads) / 32;
                for (int w = w0; w < w0 + frame_warps; ++w) {
                    total.x += warp_sums[j][w].x;
                    total.y += warp_sums[j][w].y;
                }
            }
            epilogue.arrive(BT, total);
        }
        epilogue.template after<Mirrored>(v);
    }
}

template <bool WithState, class Shape, bool Refresh>
template <bool Mirrored, int Threads, class PixelSum, class RefreshedH>
__device__ void StepEpilogue<WithState, Shape, Refresh>::run(const Parallel2dView& v,
                                                             float* /*u: not stored*/,
                                                             PixelSum&& pixel_sum,
                                                             RefreshedH&& refreshed_h) const
{
    static_assert(adjoint_tile == pair_tile && Mirrored);
    constexpr int tiles = adjoint_block_tiles<Mirrored>;
    constexpr int pixels = adjoint_tile * adjoint_tile * tiles;  // the block's
    constexpr int pixel_warps = pixels / 32;
    constexpr int halo = 2 * adjoint_tile * tiles;
    static_assert(2 * pixels <= Threads && halo <= pixels);
    __shared__ CgnrScalars before;  // the frame's; then with the dot step's f and gᵀd
    __shared__ float alpha, beta, fx_of[WithState ? pixels : 1];
    __shared__ bool steps, moves, cancels;
    __shared__ double2 warp_dots[pixel_warps][3];
    __shared__ double2 grid_dots[3];  // the sums of every block's warp_dots
    __shared__ PairTile next_x[WithState ? tiles : 1];  // x_{k+1} of a tile and its halo
    __shared__ float2 halo_xd[WithState ? halo : 1];     // x_k and d_k of the halo
    __shared__ PairTile d_next[tiles];                   // d_{k+1} of the tiles (no halo)
    const int t = threadIdx.x;
    const unsigned blocks = gridDim.x * gridDim.y;
    const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
    const index_t nx = v.nx, ny = v.ny;
    // (WithState wherever the fold has terms, launch_one_pass: without, the
    // terms' code is not compiled in; ct_256 without a regularizer 0.08 ms
    // a solve faster for it, history v43)
    const bool regularized = WithState && op.e != nullptr;
    const bool with_fx = regularized && op.fx != nullptr;
    // Threads [0, pixels) own a pixel each; [pixels, 2 pixels) form fx of
    // the same pixels, and the first of them x_{k+1} of the halo.
    const bool owns = t < pixels;
    const int item = t < 2 * pixels ? t % pixels : 0;
    bool inside = false;
    size_type k = 0;
    {
        const AdjointPixel at = adjoint_pixel<Mirrored>(v, item);
        inside = t < 2 * pixels && at.ix < nx && at.iy < ny;
        k = static_cast<size_type>(at.iy) * nx + at.ix;
    }
    if (t == 0) before = op.s[0];  // nobody writes the scalars before the sync below

    // u, e = u + F(x_k, d), and the update's operands (none needs α)
    UpdateOperands o{};
    float g_k = 0.0f;
    if (owns && inside) {
        o.d = w.d[k];
        o.h = Refresh ? refreshed_h(adjoint_pixel<Mirrored>(v, item)) : w.h[k];
        o.x = w.x[k];
        // (without terms g may be h, and then it is refreshed with h)
        g_k = Refresh && op.g == w.h ? o.h : op.g[k];
        o.u = pixel_sum(adjoint_pixel<Mirrored>(v, item));
        o.e = o.u;
        if (regularized) o.e = fold_at<Shape>(op.fold, 1, 0, k, o.u);
    }
    // fx = F(x_k, x_k); x_k and d_k of the halo
    if (!owns && inside && with_fx) {
        const float f = fold_at<Shape>(op.at_x, 1, 0, k);
        fx_of[item] = f;
    }
    if constexpr (WithState) {  // (before the sync: the neighbours move them after it)
        int tile = 0;
        index_t x0 = 0, y0 = 0, hx = 0, hy = 0;
        if (adjoint_halo<Mirrored>(v, t - pixels, tile, x0, y0, hx, hy)) {
            const size_type h = static_cast<size_type>(hy) * nx + hx;
            halo_xd[t - pixels] = make_float2(w.x[h], w.d[h]);
        }
    }
    if (with_fx) __syncthreads();  // fx_of
    // The block's sums of dᵀe, gᵀd and, with p = h + fx, pᵀe, eᵀe, pᵀp
    if (owns) {  // whole warps
        double sum[8] = {};  // the five, then three zeros (warp_sum_scatter's power of two)
        if (inside) {
            if (with_fx) o.fx = fx_of[item];
            const double p = o.h + o.fx, e = o.e, d = o.d;
            sum[0] = d * e;
            sum[1] = static_cast<double>(g_k) * d;
            sum[2] = p * e;
            sum[3] = e * e;
            sum[4] = p * p;
        }
        // Summed together (warp_sum_scatter): 9 shuffles of a double where
        // the five apart took 25, ~500 fewer a block before the grid sync
        // (ct_256 ~0.1 ms a solve faster, history v45). Lane l holds
        // the warp's sum l / 4; lanes 0, 4, ..., 20 store sums 0 ... 5 (5 is
        // a zero: warp_dots' last half).
        const double warp_sum = warp_sum_scatter(sum);
        const int lane = t % 32;
        if (lane % 4 == 0 && lane < 24) {
            double2(&dots_of_warp)[3] = warp_dots[t / 32];
            if (lane % 8 == 0) {
                dots_of_warp[lane / 8].x = warp_sum;
            } else {
                dots_of_warp[lane / 8].y = warp_sum;
            }
        }
    }
    __syncthreads();
    if (t < 3) {
        double2 total{0.0, 0.0};
        for (int wp = 0; wp < pixel_warps; ++wp) {
            total.x += warp_dots[wp][t].x;
            total.y += warp_dots[wp][t].y;
        }
        dots[block * 3 + t] = total;
    }

    grid_barrier();  // one block per SM, as the persistent kernels' (grid_barrier.cuh)
    // α and, expanded, β: every block alike, from the grid's sums (a warp
    // each, their loads in flight together)
    if (t < 96) {
        const double2 sum = warp_sum_partials(t % 32, dots + t / 32, blocks, 3);
        if (t % 32 == 0) grid_dots[t / 32] = sum;
    }
    __syncthreads();
    if (t == 0) {
        const double2* total = grid_dots;
        CgnrScalars local = before;
        if (local.status == SolveStatus::running) {  // as StepDotsAt::finish
            local.f = total[0].x;
            local.gd = total[0].y;
        }
        before = local;
        steps = local.status == SolveStatus::running && cgnr_scalars_alpha(local);
        alpha = static_cast<float>(local.alpha);
        const bool known =
            !steps || cgnr_scalars_end_expanded(local, params, alpha, total[1].x,
                                                total[1].y, total[2].x);
        cancels = !known;
        if (known) {
            if (block == 0 && before.status == SolveStatus::running) *op.s = local;
            moves = local.status == SolveStatus::running;
            beta = static_cast<float>(local.beta);
        }
    }
    __syncthreads();
    // x, h and g of the block's pixels
    float g_next = 0.0f;
    if (owns && inside && steps) g_next = update_from(o, k, alpha, with_fx, w.x, w.h, w.g);
    if (Refresh && owns && inside && !steps) w.h[k] = o.h;  // h_k = Aᵀ(A x_k − b) all the same
    if (cancels) {  // uniform over the grid: gᵀe and ‖g‖² over the new g
        double2 sum{0.0, 0.0};
        if (owns && inside && steps) {
            const double gn = g_next;
            sum = {gn * o.e, gn * gn};
        }
        store_block_sum<Threads / 32>(sum, t, sums + block);
        grid_barrier();
        if (t < 32) {
            cooperative_beta(t, sums, blocks, before, params, block == 0, op.s, moves, beta);
        }
        __syncthreads();
    }
    // d = −g + β d (moves: uniform over the grid) into d and, after the
    // barrier, from d_next's tiles into the pair images line by line; x_{k+1}
    // of the tile and its halo for the state (the places anew: kept across
    // the sync they took registers)
    const AdjointPixel at = adjoint_pixel<Mirrored>(v, item);
    if (moves && owns && inside) {
        const float d = direction_at(g_next, beta, o.d);
        w.d[k] = d;
        d_next[at.tile][at.iy - at.y0][at.ix - at.x0] = d;
    }
    if constexpr (WithState) {
        if (owns && inside) {
            next_x[at.tile][at.iy - at.y0][at.ix - at.x0] =
                steps ? stepped_x(o.x, alpha, o.d) : o.x;
        }
        int tile = 0;
        index_t x0 = 0, y0 = 0, hx = 0, hy = 0;
        if (adjoint_halo<Mirrored>(v, t - pixels, tile, x0, y0, hx, hy)) {
            const float2 xd = halo_xd[t - pixels];
            next_x[tile][hy - y0][hx - x0] = steps ? stepped_x(xd.x, alpha, xd.y) : xd.x;
        }
    }
    __syncthreads();
    if (moves) put_tiles_in_pairs<Mirrored, Threads>(v, w.pairs, d_next);
    if constexpr (WithState) {
        if (owns && inside) {
            const PairTile& near = next_x[at.tile];
            const int lx = static_cast<int>(at.ix - at.x0), ly = static_cast<int>(at.iy - at.y0);
            const float here = near[ly][lx];
            // forward_gradient's operations
            const float gx = at.ix + 1 < nx ? near[ly][lx + 1] - here : 0.0f;
            const float gy = at.iy + 1 < ny ? near[ly + 1][lx] - here : 0.0f;
            terms_prepare_at<Shape>(prepare.terms, prepare.state.data,
                                    static_cast<size_type>(nx) * ny, k, here, gx, gy);
        }
    }
}

}  // namespace recon::kernels::cuda::p2
