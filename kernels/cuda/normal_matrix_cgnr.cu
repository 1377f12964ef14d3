// The persistent CGNR solve on the normal matrix G = AᵀA, for systems with
// few columns (n ≤ 3,072): the fused form without a regularizer (DESIGN
// §3), u_k = G d_k in place of Aᵀ(A d_k): one frame here, batches of 2 to
// 4 frames in normal_matrix_batch_cgnr.cu (with its own layout of the
// image-space work); what both share is normal_matrix_layout.cuh.
//
// Why: on the rows of A (persistent.cu) every block scatters its rows into
// a whole image, and the 132 images meet through 100k vector atomics and
// a grid sync each iteration (~3.4 µs on paper_large), after which every
// block repeats the image-space work on all n elements (~2.7 µs). G is
// dense but small enough to stay on chip: block b holds rows [24 b,
// 24 b + 24) of G (n = 3,000: 281 KB a block, 32 of each thread's 144
// entries in registers, the rest in 224 KB of shared memory), so u = G d
// needs no scatter: each block sums its own 24 rows and writes them; one
// grid sync; then every block reads the n values of u, sums the
// iteration's five dot products (f = dᵀu, gᵀd, hᵀu, uᵀu, hᵀh:
// cgnr_scalars_end_expanded) over all n columns itself, in one fixed order
// (so every block computes the same α and β), and moves its copy of h and
// d. (Exchanging each block's share of the sums instead measured ~1,100
// cycles per iteration more: the shares' loads wait behind the loads of u.)
// Each iteration's one pass over G reads 224 KB of shared memory per SM:
// ~1,800 cycles at 128 bytes per cycle.

// Layout of the work in a block: threads [256 g, 256 g + 256) take rows
// [12 g, 12 g + 12) of the block's rows; thread t of a group takes columns
// t, t + 256, ..., t + 2,816 of those rows and keeps h and d of the same
// columns in registers (both groups alike). Lane l of warp 0 keeps x, h
// and d of the block's row l (computed with the same operations as the
// column's owners, so bit for bit the same values).
//
// The gradient itself comes from the rows of A, as on the rows' path: at
// the start h0 = Aᵀ(A x0 − b), and at each residual replacement
// h = Aᵀ(A x − b), with each row's r_i = (A x)_i − b_i formed in
// measurement space (b subtracted before rounding) and scattered into the
// block's image; the images meet through global atomics and one grid
// sync. For that, G's last column of entries (24 KB of shared memory) lends
// its slots to x and the image, and is loaded again after. Between
// replacements only the search directions see G's rounding (its entries
// are rounded to float once); formed as G x − Aᵀb, h would carry an error of
// ~eps ‖Aᵀb‖ instead of ~eps ‖Aᵀ‖ ‖A x − b‖, and the solution
// cond(AᵀA) times that (measured: the ill-conditioned test problem missed
// its 1e-4 by that).

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "cooperative_step.cuh"
#include "grid_barrier.cuh"
#include "kernels/cgnr_scalars.hpp"
#include "launch.cuh"
#include "normal_matrix_batch_cgnr.cuh"
#include "normal_matrix_cgnr.cuh"
#include "normal_matrix_layout.cuh"
#include "scaled_dots.cuh"
#include "system_kernels.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {
namespace {

using namespace normal_matrix;

// This kernel's layout of G's entries: 2 row groups of 256 threads, 12
// rows each; thread t of a group takes 12 columns of its rows, 32 of its
// 144 entries in registers and 112 in shared memory (224 KB).
constexpr int groups = 2;                           // row groups of a block
constexpr int group_threads = threads / groups;     // 256
constexpr int group_warps = group_threads / 32;     // 8
constexpr int group_rows = block_rows / groups;     // 12: rows of G per group
constexpr int thread_cols = max_cols / group_threads;  // 12: columns per thread
constexpr int entries = group_rows * thread_cols;   // G entries per thread: 144
constexpr int in_registers = 32;
constexpr int in_shared = entries - in_registers;   // 112 slots of `threads` floats: 224 KB
constexpr std::size_t shared_bytes = static_cast<std::size_t>(in_shared) * threads * sizeof(float);

static_assert(in_registers % 2 == 0, "the entries in shared memory start a pair");

/// Where entries p and p + 1 (p ≥ in_registers, p even) live in shared
/// memory: pairs of slots, each thread's two entries side by side, so that
/// they come in one 8-byte load (a warp's is two lines, as two 4-byte loads
/// are; half the load instructions). The index counts float2s.
__device__ __forceinline__ int pair_index(int p)
{
    return (p - in_registers) / 2 * threads + static_cast<int>(threadIdx.x);
}

/// Where entry p ≥ in_registers lives, counted in floats.
__device__ __forceinline__ int slot_index(int p) { return 2 * pair_index(p) + (p - in_registers) % 2; }

/// The thread's 144 entries of G (which row and column each one is, is the
/// kernel's layout): the first in_registers in registers, the others in
/// shared-memory slots (slot_index).
struct Entries {
    float reg[in_registers];
    const float* slots;

    /// Entries p and p + 1, p even (in shared memory: one 8-byte load).
    __device__ __forceinline__ float2 pair(int p) const
    {
        if (p < in_registers) {
            return float2{reg[p < in_registers ? p : 0], reg[p + 1 < in_registers ? p + 1 : 0]};
        }
        return reinterpret_cast<const float2*>(slots)[pair_index(p)];
    }
};

// Which of the block's entries of G a thread takes: thread t of group g
// takes rows 24 b + 12 g + r at columns t, t + 256, ..., t + 2,816, entry
// p = c·12 + r being G(24 b + 12 g + r, column(c)).
__device__ __forceinline__ int column(int c) { return c * group_threads + threadIdx.x % group_threads; }

__device__ __forceinline__ float entry_of(Gram gram, int p)
{
    const int row = blockIdx.x * block_rows + threadIdx.x / group_threads * group_rows + p % group_rows;
    return gram_entry(gram, row, column(p / group_rows));
}

/// The thread's entries from G in device memory (each thread writes only
/// its own slots).
__device__ __forceinline__ Entries load_entries(Gram gram, float* slots)
{
    Entries e{{}, slots};
#pragma unroll
    for (int p = 0; p < in_registers; ++p) e.reg[p] = entry_of(gram, p);
#pragma unroll 16
    for (int p = in_registers; p < entries; ++p) {
        slots[slot_index(p)] = entry_of(gram, p);
    }
    return e;
}

constexpr int sums = 5;                             // f, gᵀd, hᵀu, uᵀu, hᵀh
// G's entries of column c = 11 (12 slots, 24 KB), lent to x and an image
// while a gradient is formed from the rows of A, and loaded again after
constexpr int spare_entries = group_rows;
static_assert(spare_entries * threads == 2 * max_cols, "the lent slots hold x and one image");
static_assert((in_shared - spare_entries) % 2 == 0, "the lent slots are whole pairs");

static_assert(block_rows <= 32, "warp 0's lanes keep the block's rows");

struct Args {
    CgnrParams params;
    int replacement;
    int n;
    index_t m;
    const float* gram;       // [n][n]
    const float* b;          // [m]
    float* x;
    float* h;
    float* g;                // may be h
    float* d;
    CgnrScalars* scalars;
    // (rows of whole cache lines, whatever n: with rows of n = 3,000 floats
    // every other row straddled lines and the loads after the grid sync
    // took twice as long)
    float* image_sums;       // [4][max_cols] zeroed: h0, Aᵀb, two for the replacements
    float* u_slots;          // [2][max_cols]
    int phases;              // print block 0's cycles per phase (RECON_PERSISTENT_PHASES)
};

/// Phases of an iteration, as block 0's thread 0 times them.
enum Phase : int {
    ph_product, ph_publish, ph_sync, ph_sums, ph_scalar_code, ph_scalars, ph_step, ph_beta,
    ph_direction,
    // a residual replacement's parts (within ph_step)
    ph_x_sync, ph_scatter, ph_sum_sync, ph_reload, ph_load_h, ph_count
};

/// What one block shares between its threads.
struct Block {
    float row_sums[warps][16];  // the warps' sums of their group's rows
    /// x, h, d and u of the block's row l, kept by lane l of warp 0 (in
    /// shared memory: registers are all taken by the other threads' G)
    float own_x[block_rows], own_h[block_rows], own_d[block_rows], own_u[block_rows];
    double warp_sums[warps][sums];  // the warps' sums of block-wide sums
    CgnrScalars state;
    float alpha;
    float beta;
    int flags;
    int running;
    long long cycles[ph_count];
    long long last;
};

/// (G v) of the block's rows: lane l of warp 0 returns row l's value (the
/// others 0). v holds the thread's columns. One barrier.
__device__ __forceinline__ float block_rows_times(Block& s, const Entries& g, const float (&v)[thread_cols])
{
    float w[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) w[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < thread_cols; ++c) {
#pragma unroll
        for (int r = 0; r < group_rows; r += 2) {
            const float2 e = g.pair(c * group_rows + r);
            w[r] = __fmaf_rn(e.x, v[c], w[r]);
            w[r + 1] = __fmaf_rn(e.y, v[c], w[r + 1]);
        }
    }
    const float t = warp_sum_scatter<16>(w);  // lane l: the warp's sum of row l / 2
    const int lane = threadIdx.x % 32;
    if (lane % 2 == 0) s.row_sums[threadIdx.x / 32][lane / 2] = t;
    __syncthreads();
    float sum = 0.0f;
    if (threadIdx.x < block_rows) {
        const int first = threadIdx.x / group_rows * group_warps;
        for (int w = 0; w < group_warps; ++w) sum += s.row_sums[first + w][threadIdx.x % group_rows];
    }
    return sum;
}

/// Sums v over group 0's threads (each column once) in one fixed order: the
/// same in every block. Thread 0 gets the totals. One barrier.
__device__ __forceinline__ void block_sums(Block& s, double (&v)[2], double (&total)[2])
{
    const int group = threadIdx.x / group_threads;
    if (group != 0) v[0] = v[1] = 0.0;
    const double t = warp_sum_scatter<2>(v);  // lane 0: sum 0, lane 16: sum 1
    const int lane = threadIdx.x % 32;
    if (lane % 16 == 0) s.warp_sums[threadIdx.x / 32][lane / 16] = t;
    __syncthreads();
    total[0] = total[1] = 0.0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < group_warps; ++w) {
            total[0] += s.warp_sums[w][0];
            total[1] += s.warp_sums[w][1];
        }
    }
}

/// c_i of row i: with x (in shared memory), (A x)_i − b_i, the row's sum in
/// double and b subtracted before rounding (as the residual primitive);
/// without, b_i.
template <class System>
__device__ __forceinline__ float row_value(const System& sys, const Args& a, const float* xs,
                                           index_t row)
{
    if (xs == nullptr) return __ldg(a.b + row);
    double acc = 0.0;
    device_row(sys, row, [&](index_t col, float w) { acc += static_cast<double>(w) * xs[col]; });
    return static_cast<float>(acc - __ldg(a.b + row));
}

/// Adds c_i A_ij over the block's rows of A into `image` (shared memory,
/// float atomics): the block's share of Aᵀ(A x − b), or of Aᵀb without x.
template <class System>
__device__ __forceinline__ void scatter_rows(const System& sys, const Args& a, const float* xs,
                                             float* image)
{
    const RowRange range = block_row_range(a.m);
    for (index_t row = range.first + threadIdx.x; row < range.last; row += threads) {
        const float c = row_value(sys, a, xs, row);
        device_row(sys, row, [&](index_t col, float w) { atomicAdd(image + col, c * w); });
    }
}

/// The block's image into the global sum (sm_90's four-float atomics,
/// zeros skipped, each block starting at another group of four).
__device__ __forceinline__ void add_image(const float* image, float* sum)
{
    constexpr int groups = max_cols / 4;
    const int start = static_cast<int>((static_cast<long long>(blockIdx.x) * groups) / gridDim.x);
    for (int g0 = threadIdx.x; g0 < groups; g0 += threads) {
        const int j = 4 * (g0 + start < groups ? g0 + start : g0 + start - groups);
        const float4 v{image[j], image[j + 1], image[j + 2], image[j + 3]};
        if (v.x != 0.0f || v.y != 0.0f || v.z != 0.0f || v.w != 0.0f) {
            add_four(reinterpret_cast<float4*>(sum + j), v);
        }
    }
}

/// Thread 0 makes its state's outcome known to the block (a barrier must
/// follow).
__device__ __forceinline__ void publish(Block& s, int flags)
{
    s.flags = flags;
    s.alpha = static_cast<float>(s.state.alpha);
    s.beta = static_cast<float>(s.state.beta);
    s.running = s.state.status == SolveStatus::running ? 1 : 0;
}

template <class System>
__global__ void __launch_bounds__(threads, 1) normal_matrix_cgnr_kernel(System sys, Args a)
{
    const long long started = clock64();
    extern __shared__ float slots[];
    __shared__ alignas(Block) unsigned char block_bytes[sizeof(Block)];  // (no constructor runs)
    Block& s = *reinterpret_cast<Block*>(block_bytes);
    const int lane = threadIdx.x % 32;
    const int group = threadIdx.x / group_threads;
    const int first_row = blockIdx.x * block_rows;
    // lane l of warp 0 keeps x, h and d of the block's row l
    const int own = first_row + threadIdx.x;
    const bool owner = threadIdx.x < block_rows && own < a.n;
    const int n = a.n;
    const auto valid = [n](int c) { return column(c) < n; };

    // The slots of G's last column of entries, lent to x and the block's
    // image of Aᵀ(·) while a gradient is formed from the rows of A.
    float* const xs = slots + (in_shared - spare_entries) * threads;
    float* const image = xs + max_cols;
    // the gradient of x, from the rows of A, into sum (grid-wide; x in xs)
    const auto gradient_into = [&](float* sum) {
        __syncthreads();
        scatter_rows(sys, a, xs, image);
        __syncthreads();
        add_image(image, sum);
    };

    // h0 = Aᵀ(A x0 − b), and Aᵀb: its norm is the stop test's reference.
    // From x0 = 0 (every block sees the same x0), r0 = −b exactly, so
    // h0 = −Aᵀb and one pass over the rows serves both.
    bool warm = false;
    for (int j = threadIdx.x; j < max_cols; j += threads) {
        xs[j] = j < n ? a.x[j] : 0.0f;
        warm = warm || xs[j] != 0.0f;
        image[j] = 0.0f;
    }
    warm = __syncthreads_or(warm) != 0;
    if (warm) {
        gradient_into(a.image_sums);
        __syncthreads();
        for (int j = threadIdx.x; j < max_cols; j += threads) image[j] = 0.0f;
        __syncthreads();
    }
    scatter_rows(sys, a, nullptr, image);
    __syncthreads();
    add_image(image, a.image_sums + max_cols);
    __syncthreads();
    const Entries g = load_entries(Gram{a.gram, a.n}, slots);  // each thread reads and writes only its own slots
    grid_barrier();
    // g0 = h0;  d0 = −g0;  ‖g0‖² and ‖Aᵀb‖², summed by every block alike
    float h[thread_cols], d[thread_cols];
    double v[2] = {};
    const float* const ab_sum = a.image_sums + max_cols;
    const auto h0 = [&](int j) { return warm ? __ldcg(a.image_sums + j) : -__ldcg(ab_sum + j); };
#pragma unroll
    for (int c = 0; c < thread_cols; ++c) {
        h[c] = valid(c) ? h0(column(c)) : 0.0f;
        d[c] = -h[c];
        const double ab = valid(c) ? __ldcg(ab_sum + column(c)) : 0.0f;
        v[0] += static_cast<double>(h[c]) * h[c];
        v[1] += ab * ab;
    }
    if (owner) {
        const int l = threadIdx.x;
        s.own_x[l] = a.x[own];
        s.own_h[l] = h0(own);
        s.own_d[l] = -s.own_h[l];
    }
    double total[2];
    block_sums(s, v, total);
    if (threadIdx.x == 0) {
        s.state = a.scalars[0];
        cgnr_scalars_begin(s.state, a.params, total[0], total[1]);
        publish(s, 0);
    }
    __syncthreads();

    const bool clock_on = a.phases != 0 && blockIdx.x == 0 && threadIdx.x == 0;
    if (clock_on) {
        for (int p = 0; p < ph_count; ++p) s.cycles[p] = 0;
        s.last = clock64();
        printf("normal-matrix kernel, block 0's cycles from its start to the first iteration "
               "(G loaded, h0 and Aᵀb from the rows of A): %lld\n", s.last - started);
    }
    int slot = 0;
    int k = 0;
    int replaced = 0;
    for (; s.running != 0; ++k) {
        // u_k = G d_k, the block's rows
        const float u_own = block_rows_times(s, g, d);
        mark(s, clock_on, ph_product);
        if (owner) s.own_u[threadIdx.x] = u_own;
        // its rows of u, for every block
        float* const u_slot = a.u_slots + slot * max_cols;
        if (owner) u_slot[own] = u_own;
        mark(s, clock_on, ph_publish);
        grid_barrier();
        mark(s, clock_on, ph_sync);
        // u through L1 (plain loads, not __ldcg): both row groups load the
        // same columns, and in L1 the second group's requests merge with the
        // first's instead of queueing in L2 behind every other SM's for the
        // same 96 lines (the sums phase 2,258 → 1,785 cycles, history v17).
        // The grid sync's acquire invalidates L1 (CCTL.IVALL in the SASS),
        // so the slot's u of two iterations back is never read.
        float u[thread_cols];
#pragma unroll
        for (int c = 0; c < thread_cols; ++c) u[c] = valid(c) ? u_slot[column(c)] : 0.0f;
        const bool replace = a.replacement > 0 && (k + 1) % a.replacement == 0;
        // f = dᵀu, gᵀd, hᵀu, uᵀu and hᵀh (g = h, e = u) over every column,
        // summed by every block alike (group 0's threads hold each column
        // once): no partial sums to exchange through L2
        double w[8] = {};
        // (in float on scaled values, scaled_dots.cuh: against products in
        // double, ptxas's spills 40 → 8 bytes and the product phase 2,517 →
        // 2,165 cycles; this phase unchanged, history v16)
        if (group == 0) fused_step_dots(d, h, u, w);
        const double t = warp_sum_scatter<8>(w);  // lane 4 q: the warp's sum q
        if (group == 0 && lane % 4 == 0 && lane / 4 < sums) s.warp_sums[threadIdx.x / 32][lane / 4] = t;
        __syncthreads();
        // α_k and, expanded, β_k
        if (threadIdx.x < 32) {
            double sum = 0.0;
            if (lane < sums) {
                for (int w8 = 0; w8 < group_warps; ++w8) sum += s.warp_sums[w8][lane];
            }
            double total5[sums];
#pragma unroll
            for (int q = 0; q < sums; ++q) total5[q] = __shfl_sync(0xffffffffu, sum, q);
            mark(s, clock_on, ph_sums);
            if (lane == 0) {
                CgnrScalars state = s.state;  // (in registers: the code below is the critical path)
                int flags = 0;
                if (state.status == SolveStatus::running) {
                    state.f = total5[0];
                    state.gd = total5[1];
                    if (cgnr_scalars_alpha(state)) {
                        flags = step_taken;
                        const double step = static_cast<float>(state.alpha);
                        if (!replace && cgnr_scalars_end_expanded(state, a.params, step, total5[2],
                                                                  total5[3], total5[4])) {
                            flags |= beta_known;
                        }
                    }
                }
                s.state = state;
                publish(s, flags);
                mark(s, clock_on, ph_scalar_code);
            }
        }
        slot ^= 1;
        __syncthreads();
        mark(s, clock_on, ph_scalars);
        const int flags = s.flags;
        if ((flags & step_taken) == 0) break;  // stopped (every block alike)
        // x_{k+1} = x_k + α_k d_k;  h_{k+1} = h_k + α_k u_k
        const float alpha = s.alpha;
        if (owner) {
            const int l = threadIdx.x;
            s.own_x[l] = stepped(s.own_x[l], alpha, s.own_d[l]);
            s.own_h[l] = stepped(s.own_h[l], alpha, s.own_u[l]);
        }
#pragma unroll
        for (int c = 0; c < thread_cols; ++c) h[c] = stepped(h[c], alpha, u[c]);
        if (replace) {
            // h_{k+1} = Aᵀ(A x_{k+1} − b), against the recurrence's drift
            long long t = clock_on ? clock64() : 0;
            const auto part = [&](Phase p) {
                if (clock_on) {
                    const long long now = clock64();
                    s.cycles[p] += now - t;
                    t = now;
                }
            };
            if (owner) a.x[own] = s.own_x[threadIdx.x];
            grid_barrier();
            part(ph_x_sync);
            // two sums alternate; each replacement clears the next one's
            float* const sum = a.image_sums + (2 + replaced % 2) * max_cols;
            float* const next = a.image_sums + (2 + (replaced + 1) % 2) * max_cols;
            ++replaced;
            for (int j = threadIdx.x; j < max_cols; j += threads) {
                xs[j] = j < n ? __ldcg(a.x + j) : 0.0f;
                image[j] = 0.0f;
            }
            for (int j = blockIdx.x * threads + threadIdx.x; j < max_cols; j += gridDim.x * threads) {
                next[j] = 0.0f;
            }
            gradient_into(sum);
            part(ph_scatter);
            grid_barrier();
            part(ph_sum_sync);
            // G's entries back into the lent slots
#pragma unroll
            for (int p = entries - spare_entries; p < entries; ++p) {
                slots[slot_index(p)] = entry_of(Gram{a.gram, a.n}, p);
            }
            if (owner) s.own_h[threadIdx.x] = __ldcg(sum + own);
            part(ph_reload);
#pragma unroll
            for (int c = 0; c < thread_cols; ++c) h[c] = valid(c) ? __ldcg(sum + column(c)) : 0.0f;
            part(ph_load_h);
        }
        mark(s, clock_on, ph_step);
        if ((flags & beta_known) == 0) {
            // β_k from the new gradient, summed whole by every block alike
            // (the expansion cancelled, or h was replaced)
            double vb[2] = {};
#pragma unroll
            for (int c = 0; c < thread_cols; ++c) {
                vb[0] += static_cast<double>(h[c]) * u[c];
                vb[1] += static_cast<double>(h[c]) * h[c];
            }
            block_sums(s, vb, total);
            if (threadIdx.x == 0) {
                cgnr_scalars_end(s.state, a.params, total[0], total[1]);
                publish(s, flags | beta_known);
            }
            __syncthreads();
        }
        mark(s, clock_on, ph_beta);
        // d_{k+1} = −g_{k+1} + β_k d_k while the frame runs
        if (s.running != 0) {
            const float beta = s.beta;
            if (owner) {
                s.own_d[threadIdx.x] = next_direction(s.own_h[threadIdx.x], beta, s.own_d[threadIdx.x]);
            }
#pragma unroll
            for (int c = 0; c < thread_cols; ++c) d[c] = next_direction(h[c], beta, d[c]);
        }
        mark(s, clock_on, ph_direction);
    }
    if (clock_on && k > 0) {
        const double per = 1.0 / k;
        printf("normal-matrix kernel, block 0's cycles per iteration over %d: product %.0f "
               "publish %.0f sync %.0f sums %.0f scalar code %.0f barrier %.0f step %.0f "
               "beta %.0f direction %.0f\n",
               k, per * s.cycles[ph_product], per * s.cycles[ph_publish], per * s.cycles[ph_sync],
               per * s.cycles[ph_sums], per * s.cycles[ph_scalar_code], per * s.cycles[ph_scalars], per * s.cycles[ph_step], per * s.cycles[ph_beta],
               per * s.cycles[ph_direction]);
        if (replaced > 0) {
            const double each = 1.0 / replaced;
            printf("normal-matrix kernel, block 0's cycles per residual replacement over %d: x sync "
                   "%.0f rows scattered %.0f sync %.0f G reloaded %.0f h loaded %.0f\n",
                   replaced, each * s.cycles[ph_x_sync], each * s.cycles[ph_scatter],
                   each * s.cycles[ph_sum_sync], each * s.cycles[ph_reload], each * s.cycles[ph_load_h]);
        }
    }

    if (owner) a.x[own] = s.own_x[threadIdx.x];
    if (blockIdx.x != 0) return;
    if (group == 0) {
#pragma unroll
        for (int c = 0; c < thread_cols; ++c) {
            if (!valid(c)) continue;
            a.h[column(c)] = h[c];
            a.g[column(c)] = h[c];
            a.d[column(c)] = d[c];
        }
    }
    if (threadIdx.x == 0) a.scalars[0] = s.state;
}

/// The kernels a batch of `batch` frames takes: one frame's, and for 2 or
/// more (in launches of up to 4) the batch kernel.
template <class System>
std::string kernels_fit(const Executor& exec, const PersistentCgnrProblem& p)
{
    const index_t n = cols_of(p.system);
    const bool single = p.batch == 1 || p.batch % normal_matrix_batch_frames == 1;
    if (single) {
        std::string why = kernel_fits(exec, normal_matrix_cgnr_kernel<System>, n, shared_bytes);
        if (!why.empty()) return why;
    }
    if (p.batch > 1) return normal_matrix_batch_fits(exec, p);
    return {};
}

}  // namespace

std::string normal_matrix_cgnr_supports(const Executor& exec, const PersistentCgnrProblem& p)
{
    if (exec.is_cpu()) return "the normal-matrix solve needs a CUDA executor";
    if (p.batch < 1) return "batch must be positive";
    if (p.terms.count > 0) return "the normal-matrix solve takes no regularizer";
    if (p.cgls1) return "the normal-matrix solve takes the fused form";
    const index_t n = cols_of(p.system);
    if (n > max_cols) {
        return "the normal-matrix solve keeps n <= " + std::to_string(max_cols) +
               " columns, found " + std::to_string(n);
    }
    if (blocks_for_rows(n) > sm_count(exec)) {
        return "the normal-matrix solve needs " + std::to_string(blocks_for_rows(n)) +
               " SMs for n = " + std::to_string(n) + ", the device has " +
               std::to_string(sm_count(exec));
    }
    return std::visit(
        [&](const auto& sys) { return kernels_fit<std::decay_t<decltype(sys)>>(exec, p); },
        p.system);
}

namespace {

// The one frame's workspace: four sums of the blocks' images, then the two
// slots of u.
constexpr std::size_t single_workspace_floats = 4 * max_cols + 2 * max_cols;

template <class System>
void launch_single(const Executor& exec, const System& sys, const PersistentCgnrProblem& p,
                   float* workspace)
{
    const index_t n = cols_of(p.system);
    RECON_CUDA_TRY(cudaMemsetAsync(workspace, 0, 4 * max_cols * sizeof(float), stream_of(exec)));
    Args args{};
    set_problem(args, p);
    args.image_sums = workspace;
    args.u_slots = workspace + 4 * max_cols;
    launch_on_rows(exec, shared_bytes, normal_matrix_cgnr_kernel<System>, n, sys, args);
}

}  // namespace

std::size_t normal_matrix_workspace_floats(const PersistentCgnrProblem& p)
{
    return p.batch == 1 ? single_workspace_floats : normal_matrix_batch_workspace_floats();
}

void launch_normal_matrix_cgnr(const Executor& exec, const PersistentCgnrProblem& p,
                               float* workspace)
{
    const index_t n = cols_of(p.system);
    if (p.normal_matrix.size != static_cast<size_type>(n) * n) {
        throw std::invalid_argument{"normal-matrix solve: expected an n x n normal matrix for n = " +
                                    std::to_string(n)};
    }
    if (p.batch < 1 || p.batch > normal_matrix_batch_frames) {
        throw std::invalid_argument{"normal-matrix solve: 1 to 4 frames a launch, found " +
                                    std::to_string(p.batch)};
    }
    if (p.batch > 1) {
        launch_normal_matrix_batch(exec, p, workspace);
        return;
    }
    std::visit([&](const auto& sys) { launch_single(exec, sys, p, workspace); }, p.system);
}

}  // namespace recon::kernels::cuda
