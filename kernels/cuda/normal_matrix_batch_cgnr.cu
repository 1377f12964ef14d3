// The persistent CGNR solve of 2 to 4 frames on the normal matrix G = AᵀA
// (normal_matrix_cgnr.cu solves one; normal_matrix_layout.cuh is what both
// share), the fused form without a regularizer. The frames share G and
// each pass over it: a thread's 144 entries of G multiply the 4 frames'
// d of its columns (one float4 per column, frames side by side, the slots
// past the batch zero), 4 FMAs per entry loaded. What does not fit beside
// G is the image-space state: 4 frames' h and d of every column would take
// 96 registers a thread in the one-frame layout. So each element has one
// owner instead of every block keeping a copy: thread t < 96 of block b
// keeps x, h and d of element 24 b + t / 4, frame t % 4 (in registers),
// and an iteration takes two grid syncs instead of one:
//   u = G d for the block's rows (d of every column read from d_all, 48 KB
//   through L1); the block's share of each frame's five sums over its own
//   elements (f = dᵀu, gᵀd, hᵀu, uᵀu, hᵀh) added into the exchange's
//   totals with double atomics; grid sync; every block reads the same
//   totals (so all compute the same α and β), moves its own elements of x,
//   h and d and writes its elements of d to d_all; grid sync.
// u never leaves its block. Iterations that need β from the new gradient
// (residual replacements, cancelled expansions) exchange its two sums
// through a third sync. For the gradients from the rows of A (at the start
// and at each residual replacement) G's last 48 KB of shared memory hold x
// of every column and frame, and are loaded again after; the rows' terms
// go straight into global sums with four-float atomics (one per entry for
// all frames, into one of 8 copies of the sum). The start's norms, too,
// come from the blocks' shares.

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "grid_barrier.cuh"
#include "kernels/cgnr_scalars.hpp"
#include "launch.cuh"
#include "normal_matrix_batch_cgnr.cuh"
#include "normal_matrix_layout.cuh"
#include "system_kernels.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {
namespace {

using namespace normal_matrix;

constexpr int batch_slots = normal_matrix_batch_frames;  // frames of a launch, one float4 per column
constexpr int keepers = block_rows * batch_slots;       // 96: the threads that own the block's elements
constexpr int frame_sums = 5;                           // f, gᵀd, hᵀu, uᵀu, hᵀh
constexpr int batch_sums = batch_slots * frame_sums;    // 20 shares a block publishes
// Each of an exchange's totals on a line of its own: the blocks' atomics on
// different sums queue at different L2 slices.
constexpr int total_stride = 16;                        // doubles
// Each gradient from the rows of A is summed in 8 copies, block b adding
// into copy b % 8, so that fewer atomics meet on each line of the sum
// (paper_large, 4 frames: the replacements' share of an iteration 2,570 →
// 2,135 cycles against one copy; 32 copies gained nothing more: the
// four-float atomics' own throughput bounds the scatter, ~50k cycles of a
// replacement's ~62k, history v18).
constexpr int sum_copies = 8;
constexpr int sum_floats = sum_copies * max_cols;       // float4s of one gradient's copies
// G's last 24 entries of each thread (24 slots, 48 KB), lent to x of
// every frame while a gradient is formed from the rows of A:
// gathered from L2 instead, 125 SMs' 1.8M requests for the same 48 KB
// queued there (the scatter 63k cycles without its atomics, history v18).
constexpr int lent_entries = 2 * group_rows;
static_assert(lent_entries * threads * sizeof(float) == max_cols * sizeof(float4),
              "the lent slots hold x of every column and frame");
static_assert((in_shared - lent_entries) % 2 == 0, "the lent slots are whole pairs");
static_assert(keepers % 32 == 0, "the keepers fill whole warps");

// The batch kernel's own layout of G's entries: 4 row groups of 128
// threads, 6 rows each; thread t of a group takes columns t, t + 128, ...,
// t + 2,944 (24) of its rows. The same 144 entries a thread as the one
// frame's layout (32 in registers, 112 in shared memory), but 24
// accumulators for 4 frames instead of 48: half the warp sums' shuffles,
// and registers for d's loads ahead of the FMAs.
using BatchLayout = EntryLayout<4>;
constexpr int batch_group_warps = BatchLayout::group_threads / 32;       // 4
constexpr int batch_values = batch_slots * BatchLayout::group_rows;      // 24 accumulators

struct BatchArgs {
    CgnrParams params;
    int replacement;
    int batch;
    int n;
    index_t m;
    const float* gram;   // [n][n]
    const float* b;      // [batch][m]
    float* x;            // [batch][n]
    float* h;
    float* g;            // may be h
    float* d;
    CgnrScalars* scalars;  // [batch]
    float4* d_all;       // [max_cols] d of every column (zeroed, so 0 past n and the batch)
    float4* x_all;       // [max_cols] x of every column, for the gradients from the rows of A
                         // (each block stages it in shared memory)
    float4* image_sums;  // [4][sum_copies][max_cols] zeroed: Aᵀb, h0 of a warm start, two for the
                         // replacements
    double* totals;      // [3][batch_sums][total_stride]: the exchanges' totals (exchange_totals)
    int phases;
};

/// The totals of exchange e (counted alike in every block): three buffers
/// in turn, so that while the blocks add into one and read another, block
/// 0 clears the one the next exchange adds into (its last reads ended at a
/// grid sync before).
__device__ __forceinline__ double* exchange_totals(const BatchArgs& a, int e)
{
    return a.totals + (e % 3) * batch_sums * total_stride;
}

enum BatchPhase : int {
    bph_products, bph_row_sums, bph_shares, bph_sync, bph_totals, bph_scalars, bph_step, bph_beta,
    bph_direction, bph_sync_after,
    // a residual replacement's parts (outside bph_step)
    bph_x_sync, bph_scatter, bph_reload, bph_sum_sync, bph_load_h, bph_count
};

struct BatchBlock {
    union {
        float rows[warps][batch_values];                // the warps' row sums
        double shares[keepers / 32][batch_sums];        // the keeper warps' shares
    } scratch;
    double totals[batch_sums];
    CgnrScalars state[batch_slots];
    float alpha[batch_slots];
    float beta[batch_slots];
    int flags[batch_slots];
    int running[batch_slots];
    long long cycles[bph_count];
    long long last;
};

__device__ __forceinline__ float& slot_of(float4* v, int column, int frame)
{
    return reinterpret_cast<float*>(v)[4 * column + frame];
}
__device__ __forceinline__ float component(const float4& v, int frame)
{
    return frame == 0 ? v.x : frame == 1 ? v.y : frame == 2 ? v.z : v.w;
}

/// Column j of a gradient: its copies added in one fixed order.
__device__ __forceinline__ float4 summed(const float4* sum, int j)
{
    float4 t = __ldcg(sum + j);
#pragma unroll
    for (int c = 1; c < sum_copies; ++c) {
        const float4 v = __ldcg(sum + c * max_cols + j);
        t = float4{t.x + v.x, t.y + v.y, t.z + v.z, t.w + v.w};
    }
    return t;
}

/// (G d) of the block's rows for every frame: keeper t gets row t / 4 of
/// frame t % 4 (the other threads 0). Two barriers.
__device__ __forceinline__ float batch_rows_times(BatchBlock& s, const Entries& g,
                                                  const float4* d_all, bool clock_on)
{
    // value i = frame·6 + row: lo[i] below 16, hi[i − 16] above
    float lo[16], hi[8];
#pragma unroll
    for (int i = 0; i < 16; ++i) lo[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) hi[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < BatchLayout::thread_cols; ++c) {
        // (plain loads: the grid sync before invalidates L1, and the four row
        // groups' loads of one column meet there)
        const float4 v = d_all[BatchLayout::column(c)];
        const float vf[batch_slots] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int r = 0; r < BatchLayout::group_rows; r += 2) {
            const float2 e2 = g.pair(c * BatchLayout::group_rows + r);
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const float e = q == 0 ? e2.x : e2.y;
#pragma unroll
                for (int f = 0; f < batch_slots; ++f) {
                    const int i = f * BatchLayout::group_rows + r + q;
                    if (i < 16) {
                        lo[i < 16 ? i : 0] = __fmaf_rn(e, vf[f], lo[i < 16 ? i : 0]);
                    } else {
                        hi[i < 16 ? 0 : i - 16] = __fmaf_rn(e, vf[f], hi[i < 16 ? 0 : i - 16]);
                    }
                }
            }
        }
    }
    mark(s, clock_on, bph_products);
    const float t_lo = warp_sum_scatter<16>(lo);  // lane l: the warp's value l / 2
    const float t_hi = warp_sum_scatter<8>(hi);   // lane l: the warp's value 16 + l / 4
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane % 2 == 0) s.scratch.rows[warp][lane / 2] = t_lo;
    if (lane % 4 == 0) s.scratch.rows[warp][16 + lane / 4] = t_hi;
    __syncthreads();
    float u = 0.0f;
    if (threadIdx.x < keepers) {
        const int element = threadIdx.x / batch_slots;
        const int i = threadIdx.x % batch_slots * BatchLayout::group_rows +
                      element % BatchLayout::group_rows;
        const int first = element / BatchLayout::group_rows * batch_group_warps;  // its group's warps
        for (int w = 0; w < batch_group_warps; ++w) u += s.scratch.rows[first + w][i];
    }
    __syncthreads();
    return u;
}

/// Adds the block's shares of `Count` sums of each frame (v: the keeper's
/// terms) into the totals of exchange e, one double atomic a sum; block 0
/// clears the next exchange's. One barrier.
template <int Count>
__device__ __forceinline__ void add_shares(BatchBlock& s, double (&v)[Count], const BatchArgs& a,
                                           int e)
{
    static_assert(Count <= frame_sums, "five sums a frame");
    const int lane = threadIdx.x % 32;
    if (threadIdx.x < keepers) {
        // a warp's lanes of one frame are lanes f, f + 4, ..., f + 28
#pragma unroll
        for (int o = 4; o < 32; o *= 2) {
#pragma unroll
            for (int q = 0; q < Count; ++q) v[q] += __shfl_xor_sync(0xffffffffu, v[q], o);
        }
        if (lane < batch_slots) {
#pragma unroll
            for (int q = 0; q < Count; ++q) s.scratch.shares[threadIdx.x / 32][lane * frame_sums + q] = v[q];
        }
    }
    __syncthreads();
    if (threadIdx.x < batch_sums && threadIdx.x % frame_sums < Count) {
        double sum = 0.0;
        for (int w = 0; w < keepers / 32; ++w) sum += s.scratch.shares[w][threadIdx.x];
        atomicAdd(exchange_totals(a, e) + threadIdx.x * total_stride, sum);
    }
    if (blockIdx.x == 0 && threadIdx.x < batch_sums) {
        exchange_totals(a, e + 1)[threadIdx.x * total_stride] = 0.0;
    }
}

/// s.totals: the totals of exchange e (added into before a grid sync). The
/// blocks' shares meet in atomics, in no fixed order, but every block
/// reads the same totals, so all compute the same α and β. Against shares
/// stored apart and summed by every block in one fixed order (each block
/// loading all 125 blocks' 20 shares, ~1,400 cycles an exchange; paper_large,
/// 4 frames, history v20). Ends with a barrier.
__device__ __forceinline__ void read_totals(BatchBlock& s, const BatchArgs& a, int e)
{
    if (threadIdx.x < batch_sums) {
        s.totals[threadIdx.x] = __ldcg(exchange_totals(a, e) + threadIdx.x * total_stride);
    }
    __syncthreads();
}

/// Adds c_i A_ij over the block's rows of A into the block's copy of sum
/// (four-float atomics: every frame of a column in one): with xs (x of
/// every column, in shared memory), c_i = (A x)_i − b_i for each frame (the
/// row's sum in double, b subtracted before rounding), else b_i.
template <class System>
__device__ __forceinline__ void scatter_rows_batch(const System& sys, index_t m, int batch,
                                                   const float* b, const float4* xs, float4* sum)
{
    const RowRange range = block_row_range(m);
    float4* const copy = sum + (blockIdx.x % sum_copies) * max_cols;
    for (index_t row = range.first + threadIdx.x; row < range.last; row += threads) {
        float c[batch_slots];
        if (xs != nullptr) {
            double acc[batch_slots] = {};
            device_row(sys, row, [&](index_t col, float w) {
                const float4 xv = xs[col];
                acc[0] += static_cast<double>(w) * xv.x;
                acc[1] += static_cast<double>(w) * xv.y;
                acc[2] += static_cast<double>(w) * xv.z;
                acc[3] += static_cast<double>(w) * xv.w;
            });
#pragma unroll
            for (int f = 0; f < batch_slots; ++f) {
                c[f] = f < batch ? static_cast<float>(acc[f] - __ldg(b + static_cast<size_type>(f) * m + row))
                                 : 0.0f;
            }
        } else {
#pragma unroll
            for (int f = 0; f < batch_slots; ++f) {
                c[f] = f < batch ? __ldg(b + static_cast<size_type>(f) * m + row) : 0.0f;
            }
        }
        device_row(sys, row, [&](index_t col, float w) {
            add_four(copy + col, float4{c[0] * w, c[1] * w, c[2] * w, c[3] * w});
        });
    }
}

/// x of every column from x_all into the lent slots xs, for the block's
/// scatter (x_all was written before a grid sync). Ends with a barrier.
__device__ __forceinline__ void stage_x(const float4* x_all, float4* xs)
{
    for (int j = threadIdx.x; j < max_cols; j += threads) xs[j] = __ldcg(x_all + j);
    __syncthreads();
}

/// G's entries in the lent slots, loaded again after a scatter (a barrier
/// must precede: every thread's reads of xs done).
__device__ __forceinline__ void reload_lent_entries(Gram gram, float* slots)
{
#pragma unroll 8
    for (int p = entries - lent_entries; p < entries; ++p) {
        slots[slot_index(p)] = BatchLayout::entry(gram, p);
    }
}

/// Thread f makes frame f's outcome known to the block (a barrier must follow).
__device__ __forceinline__ void publish_frame(BatchBlock& s, int f, int flags)
{
    s.flags[f] = flags;
    s.alpha[f] = static_cast<float>(s.state[f].alpha);
    s.beta[f] = static_cast<float>(s.state[f].beta);
    s.running[f] = s.state[f].status == SolveStatus::running ? 1 : 0;
}

__device__ __forceinline__ bool any_frame(const int (&v)[batch_slots], int mask)
{
    return ((v[0] | v[1] | v[2] | v[3]) & mask) != 0;
}

/// Whether a frame took its step without knowing β (a barrier must precede).
__device__ __forceinline__ bool needs_beta_sums(const BatchBlock& s)
{
    bool any = false;
#pragma unroll
    for (int f = 0; f < batch_slots; ++f) {
        any = any || ((s.flags[f] & step_taken) != 0 && (s.flags[f] & beta_known) == 0);
    }
    return any;
}

template <class System>
__global__ void __launch_bounds__(threads, 1) normal_matrix_batch_kernel(System sys, BatchArgs a)
{
    const long long started = clock64();
    extern __shared__ float slots[];
    __shared__ alignas(BatchBlock) unsigned char block_bytes[sizeof(BatchBlock)];  // (no constructor runs)
    BatchBlock& s = *reinterpret_cast<BatchBlock*>(block_bytes);
    const int n = a.n;
    // thread t < keepers keeps x, h and d of the block's element t / 4, frame t % 4
    const int row = blockIdx.x * block_rows + threadIdx.x / batch_slots;
    const int frame = threadIdx.x % batch_slots;
    const bool keeper = threadIdx.x < keepers && row < n;  // writes its slot of d_all and x_all
    const bool kept = keeper && frame < a.batch;            // a frame's element
    const size_type at = static_cast<size_type>(frame) * n + row;  // in the [batch][n] buffers
    int exchange = 0;  // the exchanges of sums so far

    // x0; with any x0 ≠ 0 in the batch, h0 = Aᵀ(A x0 − b) from the rows,
    // else h0 = −Aᵀb. Aᵀb's norm is the stop test's reference.
    bool warm = false;
    for (int j = threadIdx.x; j < a.batch * n; j += threads) warm = warm || a.x[j] != 0.0f;
    warm = __syncthreads_or(warm) != 0;
    float x = kept ? a.x[at] : 0.0f;
    float4* const ab_sum = a.image_sums;
    float4* const h0_sum = a.image_sums + sum_floats;
    float4* const xs = reinterpret_cast<float4*>(slots + (in_shared - lent_entries) * threads);
    if (warm) {
        if (keeper) slot_of(a.x_all, row, frame) = x;
        grid_barrier();
        stage_x(a.x_all, xs);
        scatter_rows_batch(sys, a.m, a.batch, a.b, xs, h0_sum);
    }
    scatter_rows_batch(sys, a.m, a.batch, a.b, nullptr, ab_sum);
    __syncthreads();  // xs read by every thread before G's entries take the slots
    const Entries g = BatchLayout::load(Gram{a.gram, n}, slots);
    grid_barrier();
    // h0 and d0 = −h0 of the block's elements; ‖h0‖² and ‖Aᵀb‖² of each
    // frame from the blocks' shares (β's buffer)
    float h = 0.0f;
    {
        double v[2] = {};
        if (kept) {
            const double ab = component(summed(ab_sum, row), frame);
            h = warm ? component(summed(h0_sum, row), frame) : static_cast<float>(-ab);
            v[0] = static_cast<double>(h) * h;
            v[1] = ab * ab;
        }
        add_shares(s, v, a, exchange);
    }
    float d = -h;
    if (keeper) slot_of(a.d_all, row, frame) = d;
    grid_barrier();
    read_totals(s, a, exchange++);
    if (threadIdx.x < batch_slots) {
        const int f = threadIdx.x;
        if (f < a.batch) {
            s.state[f] = a.scalars[f];
            cgnr_scalars_begin(s.state[f], a.params, s.totals[f * frame_sums],
                               s.totals[f * frame_sums + 1]);
        } else {
            s.state[f] = CgnrScalars{};
            s.state[f].status = SolveStatus::max_iterations;  // (no frame: never runs)
        }
        publish_frame(s, f, 0);
    }
    __syncthreads();

    const bool clock_on = a.phases != 0 && blockIdx.x == 0 && threadIdx.x == 0;
    if (clock_on) {
        for (int p = 0; p < bph_count; ++p) s.cycles[p] = 0;
        s.last = clock64();
        printf("normal-matrix batch kernel, %d frames, block 0's cycles from its start to the first "
               "iteration: %lld\n", a.batch, s.last - started);
    }
    int k = 0;
    int replaced = 0;
    for (; any_frame(s.running, 1); ++k) {
        // u_k = G d_k, the block's rows of every frame
        const float u = batch_rows_times(s, g, a.d_all, clock_on);
        mark(s, clock_on, bph_row_sums);
        {
            double v[frame_sums] = {};
            if (kept) {
                const double dd = d, hh = h, uu = u;
                v[0] = dd * uu;
                v[1] = hh * dd;
                v[2] = hh * uu;
                v[3] = uu * uu;
                v[4] = hh * hh;
            }
            add_shares(s, v, a, exchange);
        }
        mark(s, clock_on, bph_shares);
        grid_barrier();
        mark(s, clock_on, bph_sync);
        read_totals(s, a, exchange++);
        mark(s, clock_on, bph_totals);
        const bool replace = a.replacement > 0 && (k + 1) % a.replacement == 0;
        if (threadIdx.x < batch_slots) {
            // α_k and, expanded, β_k of frame f
            const int f = threadIdx.x;
            CgnrScalars state = s.state[f];
            int flags = 0;
            if (state.status == SolveStatus::running) {
                const double* t = s.totals + f * frame_sums;
                state.f = t[0];
                state.gd = t[1];
                if (cgnr_scalars_alpha(state)) {
                    flags = step_taken;
                    const double step = static_cast<float>(state.alpha);
                    if (!replace && cgnr_scalars_end_expanded(state, a.params, step, t[2], t[3], t[4])) {
                        flags |= beta_known;
                    }
                }
            }
            s.state[f] = state;
            publish_frame(s, f, flags);
        }
        __syncthreads();
        mark(s, clock_on, bph_scalars);
        if (!any_frame(s.flags, step_taken)) break;  // every frame stopped (every block alike)
        // x_{k+1} = x_k + α_k d_k;  h_{k+1} = h_k + α_k u_k
        const int flags = s.flags[frame];
        if (kept && (flags & step_taken) != 0) {
            x = stepped(x, s.alpha[frame], d);
            h = stepped(h, s.alpha[frame], u);
        }
        if (replace) {
            // h_{k+1} = Aᵀ(A x_{k+1} − b), against the recurrence's drift;
            // two sums alternate, each replacement clears the next one's
            if (keeper) slot_of(a.x_all, row, frame) = x;
            float4* const sum = a.image_sums + (2 + replaced % 2) * sum_floats;
            float4* const next = a.image_sums + (2 + (replaced + 1) % 2) * sum_floats;
            ++replaced;
            mark(s, clock_on, bph_step);
            grid_barrier();
            mark(s, clock_on, bph_x_sync);
            for (int j = blockIdx.x * threads + threadIdx.x; j < sum_floats; j += gridDim.x * threads) {
                next[j] = float4{0.0f, 0.0f, 0.0f, 0.0f};
            }
            stage_x(a.x_all, xs);
            scatter_rows_batch(sys, a.m, a.batch, a.b, xs, sum);
            __syncthreads();
            mark(s, clock_on, bph_scatter);
            reload_lent_entries(Gram{a.gram, n}, slots);
            __syncthreads();  // (for the clock: every thread's entries back)
            mark(s, clock_on, bph_reload);
            grid_barrier();
            mark(s, clock_on, bph_sum_sync);
            if (kept && (flags & step_taken) != 0) h = component(summed(sum, row), frame);
            __syncthreads();  // (for the clock: every keeper's h loaded)
            mark(s, clock_on, bph_load_h);
        }
        mark(s, clock_on, bph_step);
        if (needs_beta_sums(s)) {
            // β_k of those frames from the new gradient, summed whole (the
            // expansion cancelled, or h was replaced): a third exchange
            double v[2] = {};
            if (kept) {
                const double hh = h, uu = u;
                v[0] = hh * uu;
                v[1] = hh * hh;
            }
            add_shares(s, v, a, exchange);
            grid_barrier();
            read_totals(s, a, exchange++);
            if (threadIdx.x < batch_slots) {
                const int f = threadIdx.x;
                if ((s.flags[f] & step_taken) != 0 && (s.flags[f] & beta_known) == 0) {
                    cgnr_scalars_end(s.state[f], a.params, s.totals[f * frame_sums],
                                     s.totals[f * frame_sums + 1]);
                    publish_frame(s, f, s.flags[f] | beta_known);
                }
            }
            __syncthreads();
        }
        mark(s, clock_on, bph_beta);
        // d_{k+1} = −g_{k+1} + β_k d_k of the frames still running
        if (kept && s.running[frame] != 0) d = next_direction(h, s.beta[frame], d);
        if (keeper) slot_of(a.d_all, row, frame) = d;
        mark(s, clock_on, bph_direction);
        grid_barrier();
        mark(s, clock_on, bph_sync_after);
    }
    if (clock_on && k > 0) {
        const double per = 1.0 / k;
        printf("normal-matrix batch kernel, %d frames, block 0's cycles per iteration over %d: "
               "products %.0f row sums %.0f shares %.0f sync %.0f totals %.0f scalars %.0f step %.0f "
               "(replacements apart) beta %.0f direction %.0f sync %.0f (%d replacements)\n",
               a.batch, k, per * s.cycles[bph_products], per * s.cycles[bph_row_sums],
               per * s.cycles[bph_shares], per * s.cycles[bph_sync], per * s.cycles[bph_totals],
               per * s.cycles[bph_scalars], per * s.cycles[bph_step],
               per * s.cycles[bph_beta], per * s.cycles[bph_direction],
               per * s.cycles[bph_sync_after], replaced);
        if (replaced > 0) {
            const double each = 1.0 / replaced;
            printf("normal-matrix batch kernel, %d frames, block 0's cycles per residual replacement "
                   "over %d: x sync %.0f x staged, rows scattered %.0f G reloaded %.0f sync %.0f h loaded %.0f\n",
                   a.batch, replaced, each * s.cycles[bph_x_sync], each * s.cycles[bph_scatter],
                   each * s.cycles[bph_reload],
                   each * s.cycles[bph_sum_sync], each * s.cycles[bph_load_h]);
        }
    }
    if (kept) {
        a.x[at] = x;
        a.h[at] = h;
        a.g[at] = h;
        a.d[at] = d;
    }
    if (blockIdx.x == 0 && threadIdx.x < a.batch) a.scalars[threadIdx.x] = s.state[threadIdx.x];
}

// A batch's: d_all, x_all and four gradients' copies (float4 per column), then
// the exchanges' totals (doubles). All zeroed at the start.
constexpr std::size_t batch_vector_floats = (2 + 4 * sum_copies) * batch_slots * max_cols;
constexpr std::size_t batch_workspace_floats =
    batch_vector_floats + 2 * 3 * batch_sums * total_stride;
static_assert(batch_vector_floats % 4 == 0, "the totals start 16-byte aligned");

template <class System>
void launch_batch(const Executor& exec, const System& sys, const PersistentCgnrProblem& p,
                  float* workspace)
{
    const index_t n = cols_of(p.system);
    RECON_CUDA_TRY(cudaMemsetAsync(workspace, 0, batch_workspace_floats * sizeof(float),
                                   stream_of(exec)));
    auto* const vectors = reinterpret_cast<float4*>(workspace);
    auto* const totals = reinterpret_cast<double*>(workspace + batch_vector_floats);
    BatchArgs args{};
    set_problem(args, p);
    args.batch = p.batch;
    args.d_all = vectors;
    args.x_all = vectors + max_cols;
    args.image_sums = vectors + 2 * max_cols;
    args.totals = totals;
    launch_on_rows(exec, normal_matrix_batch_kernel<System>, n, sys, args);
}

}  // namespace

std::string normal_matrix_batch_fits(const Executor& exec, const PersistentCgnrProblem& p)
{
    return std::visit(
        [&](const auto& sys) {
            return kernel_fits(exec, normal_matrix_batch_kernel<std::decay_t<decltype(sys)>>,
                               cols_of(p.system));
        },
        p.system);
}

std::size_t normal_matrix_batch_workspace_floats() { return batch_workspace_floats; }

void launch_normal_matrix_batch(const Executor& exec, const PersistentCgnrProblem& p,
                                float* workspace)
{
    if (p.batch < 2 || p.batch > batch_slots) {
        throw std::invalid_argument{"normal-matrix batch solve: 2 to 4 frames a launch, found " +
                                    std::to_string(p.batch)};
    }
    std::visit([&](const auto& sys) { launch_batch(exec, sys, p, workspace); }, p.system);
}

}  // namespace recon::kernels::cuda
