// The persistent CGNR solve on the normal matrix G = AᵀA, for systems with
// few columns (n ≤ 3,072): the fused form without a regularizer (DESIGN
// §3), u_k = G d_k in place of Aᵀ(A d_k). One frame takes
// normal_matrix_cgnr_kernel (below); batches of 2 to 4 frames take
// normal_matrix_batch_kernel (further below, with its own layout of the
// image-space work).
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

#include <cooperative_groups.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "cooperative_step.cuh"
#include "kernels/cgnr_scalars.hpp"
#include "launch.cuh"
#include "normal_matrix_cgnr.cuh"
#include "scaled_dots.cuh"
#include "system_kernels.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {
namespace {

namespace cg = cooperative_groups;

// 512 threads of 128 registers rather than 1,024 of 64: the same register
// file, but each thread's fixed cost (addresses, loop state, the scalar
// code) paid half as often; with 1,024 threads ptxas spilled. All 128 are
// taken (ptxas spills 40 bytes a thread for the stored system), and with
// 224 KB of shared memory the L1 left is small, so spills come from L2:
// a change anywhere in this kernel can move spills into the iteration's
// loop (one more member of Args took them from 40 to 52 bytes; a column
// gather inlined beside the scatter, to 64 bytes and the solve from 2.05 to
// 2.24 ms: history v14 in docs/gpu-performance.md). Check `-Xptxas -v`
// before measuring a change.
constexpr int threads = 512;
constexpr int warps = threads / 32;
constexpr int groups = 2;                           // row groups of a block
constexpr int group_threads = threads / groups;     // 256
constexpr int group_warps = group_threads / 32;     // 8
constexpr int group_rows = 12;                      // rows of G per group
constexpr int block_rows = groups * group_rows;     // 24
constexpr int thread_cols = 12;                     // columns per thread
constexpr int max_cols = thread_cols * group_threads;  // 3,072
constexpr int entries = group_rows * thread_cols;   // G entries per thread: 144
constexpr int in_registers = 32;
constexpr int in_shared = entries - in_registers;   // 112 slots of `threads` floats: 224 KB
constexpr std::size_t shared_bytes = static_cast<std::size_t>(in_shared) * threads * sizeof(float);
constexpr int sums = 5;                             // f, gᵀd, hᵀu, uᵀu, hᵀh
// G's entries of column c = 11 (12 slots, 24 KB), lent to x and an image
// while a gradient is formed from the rows of A, and loaded again after
constexpr int spare_entries = group_rows;
static_assert(spare_entries * threads == 2 * max_cols, "the lent slots hold x and one image");

static_assert(block_rows <= 32, "warp 0's lanes keep the block's rows");

enum StepFlags : int {
    step_taken = 1,  // α was applied: x and h move
    beta_known = 2,  // β and the stop tests done
};

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

/// Adds the cycles since the last mark to phase p (block 0's thread 0, when
/// on); Shared: the kernel's block state (Block, BatchBlock).
template <class Shared>
__device__ __forceinline__ void mark(Shared& s, bool on, int p)
{
    if (on) {
        const long long now = clock64();
        s.cycles[p] += now - s.last;
        s.last = now;
    }
}

__device__ __forceinline__ int column(int c) { return c * group_threads + threadIdx.x % group_threads; }

/// The one rounding of x + α v and −g + β d, wherever a copy of an element
/// is moved (the column owners and warp 0's lanes must agree bit for bit).
__device__ __forceinline__ float stepped(float v, float alpha, float w) { return __fmaf_rn(alpha, w, v); }
__device__ __forceinline__ float next_direction(float g, float beta, float d)
{
    return __fmaf_rn(beta, d, -g);
}

/// The thread's entries of G: entry (r, c) is G(24 b + 12 g + r, column(c)),
/// number c·12 + r; the first in_registers in registers, the others in
/// shared-memory slots of `threads` floats (a warp's loads are one line).
struct Entries {
    float reg[in_registers];
    const float* slots;

    __device__ __forceinline__ float at(int p) const
    {
        return p < in_registers ? reg[p < in_registers ? p : 0]
                                : slots[(p - in_registers) * threads + threadIdx.x];
    }
};

/// G: the [n][n] normal matrix, row by row.
struct Gram {
    const float* entries;
    int n;
};

__device__ __forceinline__ float entry_of(Gram gram, int p)
{
    const int row = blockIdx.x * block_rows + threadIdx.x / group_threads * group_rows + p % group_rows;
    const int col = column(p / group_rows);
    return row < gram.n && col < gram.n
               ? __ldg(gram.entries + static_cast<size_type>(row) * gram.n + col)
               : 0.0f;
}

__device__ __forceinline__ Entries load_entries(Gram gram, float* slots)
{
    Entries e{{}, slots};
#pragma unroll
    for (int p = 0; p < in_registers; ++p) e.reg[p] = entry_of(gram, p);
#pragma unroll 16
    for (int p = in_registers; p < entries; ++p) {
        slots[(p - in_registers) * threads + threadIdx.x] = entry_of(gram, p);
    }
    return e;
}

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
        for (int r = 0; r < group_rows; ++r) w[r] = __fmaf_rn(g.at(c * group_rows + r), v[c], w[r]);
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

/// The block's share of the rows of A: [first, last).
struct RowRange {
    index_t first, last;
};
__device__ __forceinline__ RowRange block_row_range(index_t m)
{
    const index_t per = (m + gridDim.x - 1) / gridDim.x;
    const index_t first = static_cast<index_t>(blockIdx.x) * per;
    return {first, first + per < m ? first + per : m};
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            atomicAdd(reinterpret_cast<float4*>(sum + j), v);
#else
            atomicAdd(sum + j, v.x);
            atomicAdd(sum + j + 1, v.y);
            atomicAdd(sum + j + 2, v.z);
            atomicAdd(sum + j + 3, v.w);
#endif
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
    cg::grid_group grid = cg::this_grid();
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
    grid.sync();
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
        grid.sync();
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
            grid.sync();
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
            grid.sync();
            part(ph_sum_sync);
            // G's entries back into the lent slots
#pragma unroll
            for (int p = entries - spare_entries; p < entries; ++p) {
                slots[(p - in_registers) * threads + threadIdx.x] = entry_of(Gram{a.gram, a.n}, p);
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

// ---------------------------------------------------------------------------
// Batches of 2 to 4 frames (normal_matrix_batch_kernel). The frames share G
// and each pass over it: a thread's 144 entries of G multiply the 4 frames'
// d of its columns (one float4 per column, frames side by side, the slots
// past the batch zero), 4 FMAs per entry loaded. What does not fit beside
// G is the image-space state: 4 frames' h and d of every column would take
// 96 registers a thread in the one-frame layout. So each element has one
// owner instead of every block keeping a copy: thread t < 96 of block b
// keeps x, h and d of element 24 b + t / 4, frame t % 4 (in registers),
// and an iteration takes two grid syncs instead of one:
//   u = G d for the block's rows (d of every column read from d_all, 48 KB
//   through L1); the block's share of each frame's five sums over its own
//   elements (f = dᵀu, gᵀd, hᵀu, uᵀu, hᵀh) to `partials`; grid sync;
//   every block sums the blocks' shares in one fixed order (so all compute
//   the same α and β), moves its own elements of x, h and d and writes its
//   elements of d to d_all; grid sync.
// u never leaves its block. Iterations that need β from the new gradient
// (residual replacements, cancelled expansions) exchange its two sums
// through a third sync. For the gradients from the rows of A (at the start
// and at each residual replacement) G's last 48 KB of shared memory hold x
// of every column and frame, and are loaded again after; the rows' terms
// go straight into global sums with four-float atomics (one per entry for
// all frames, into one of 8 copies of the sum). The start's norms, too,
// come from the blocks' shares.

constexpr int batch_slots = 4;                          // frames of a launch, one float4 per column
constexpr int keepers = block_rows * batch_slots;       // 96: the threads that own the block's elements
constexpr int frame_sums = 5;                           // f, gᵀd, hᵀu, uᵀu, hᵀh
constexpr int batch_sums = batch_slots * frame_sums;    // 20 shares a block publishes
constexpr int max_blocks = max_cols / block_rows;       // 128
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
static_assert(keepers % 32 == 0, "the keepers fill whole warps");
static_assert(batch_sums <= 2 * warps, "two sums per warp at most");

// The batch kernel's own layout of G's entries: 4 row groups of 128
// threads, 6 rows each; thread t of a group takes columns t, t + 128, ...,
// t + 2,944 (24) of its rows. The same 144 entries a thread as the one
// frame's layout (32 in registers, 112 in shared memory), but 24
// accumulators for 4 frames instead of 48: half the warp sums' shuffles,
// and registers for d's loads ahead of the FMAs.
constexpr int batch_groups = 4;
constexpr int batch_group_threads = threads / batch_groups;         // 128
constexpr int batch_group_warps = batch_group_threads / 32;         // 4
constexpr int batch_group_rows = block_rows / batch_groups;         // 6
constexpr int batch_thread_cols = max_cols / batch_group_threads;   // 24
constexpr int batch_values = batch_slots * batch_group_rows;        // 24 accumulators
static_assert(batch_group_rows * batch_thread_cols == entries, "the one frame's slots");

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
    double* partials;    // [2][batch_sums][max_blocks]: the iteration's shares, then β's
    int phases;
};

enum BatchPhase : int {
    bph_products, bph_row_sums, bph_shares, bph_sync, bph_totals, bph_scalars, bph_step, bph_beta,
    bph_direction, bph_sync_after,
    // a residual replacement's parts (outside bph_step)
    bph_x_sync, bph_scatter, bph_sum_sync, bph_load_h, bph_count
};

struct BatchBlock {
    union {
        float rows[warps][batch_values];                // the warps' row sums
        double shares[keepers / 32][batch_sums];        // the keeper warps' shares
        double warp_shares[warps][frame_sums];          // the blocks' shares, summed by warp
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


__device__ __forceinline__ int batch_column(int c)
{
    return c * batch_group_threads + threadIdx.x % batch_group_threads;
}

/// Entry p = c·6 + r of the thread: G(24 b + 6 g + r, batch_column(c)).
__device__ __forceinline__ float batch_entry_of(Gram gram, int p)
{
    const int row = blockIdx.x * block_rows + threadIdx.x / batch_group_threads * batch_group_rows +
                    p % batch_group_rows;
    const int col = batch_column(p / batch_group_rows);
    return row < gram.n && col < gram.n
               ? __ldg(gram.entries + static_cast<size_type>(row) * gram.n + col)
               : 0.0f;
}

__device__ __forceinline__ Entries load_batch_entries(Gram gram, float* slots)
{
    Entries e{{}, slots};
#pragma unroll
    for (int p = 0; p < in_registers; ++p) e.reg[p] = batch_entry_of(gram, p);
#pragma unroll 16
    for (int p = in_registers; p < entries; ++p) {
        slots[(p - in_registers) * threads + threadIdx.x] = batch_entry_of(gram, p);
    }
    return e;
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
    for (int c = 0; c < batch_thread_cols; ++c) {
        // (plain loads: the grid sync before invalidates L1, and the four row
        // groups' loads of one column meet there)
        const float4 v = d_all[batch_column(c)];
        const float vf[batch_slots] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int r = 0; r < batch_group_rows; ++r) {
            const float e = g.at(c * batch_group_rows + r);
#pragma unroll
            for (int f = 0; f < batch_slots; ++f) {
                const int i = f * batch_group_rows + r;
                if (i < 16) {
                    lo[i < 16 ? i : 0] = __fmaf_rn(e, vf[f], lo[i < 16 ? i : 0]);
                } else {
                    hi[i < 16 ? 0 : i - 16] = __fmaf_rn(e, vf[f], hi[i < 16 ? 0 : i - 16]);
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
        const int i = threadIdx.x % batch_slots * batch_group_rows + element % batch_group_rows;
        const int first = element / batch_group_rows * batch_group_warps;  // its group's warps
        for (int w = 0; w < batch_group_warps; ++w) u += s.scratch.rows[first + w][i];
    }
    __syncthreads();
    return u;
}

/// Writes the block's shares of `Count` sums of each frame (v: the
/// keeper's terms) to shares[(frame·5 + q)·max_blocks + block]. One
/// barrier.
template <int Count>
__device__ __forceinline__ void publish_shares(BatchBlock& s, double (&v)[Count], double* shares)
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
    if (threadIdx.x < batch_sums) {
        double sum = 0.0;
        for (int w = 0; w < keepers / 32; ++w) sum += s.scratch.shares[w][threadIdx.x];
        shares[threadIdx.x * max_blocks + blockIdx.x] = sum;
    }
}

/// s.totals: the blocks' shares summed in one fixed order (the same in every
/// block): thread t loads block t % 128's five shares of frame t / 128, all
/// at once (one round trip through L2), then warp sums and the 4 warps of
/// each frame. Each sum's shares of all blocks are one run of memory, so a
/// warp's load takes two whole lines: with the shares of a block side by
/// side instead, every SM's warps asked each line many times, 125 SMs at
/// once, and the loads took ~9,800 cycles. Ends with a barrier.
__device__ __forceinline__ void sum_shares(BatchBlock& s, const double* shares)
{
    constexpr int frame_threads = threads / batch_slots;  // 128
    static_assert(frame_threads >= max_blocks, "a thread for each block's shares");
    const int lane = threadIdx.x % 32;
    const int block = threadIdx.x % frame_threads;
    const int frame = threadIdx.x / frame_threads;
    double v[frame_sums] = {};
    if (block < static_cast<int>(gridDim.x)) {
#pragma unroll
        for (int q = 0; q < frame_sums; ++q) {
            v[q] = __ldcg(shares + (frame * frame_sums + q) * max_blocks + block);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
#pragma unroll
        for (int q = 0; q < frame_sums; ++q) v[q] += __shfl_xor_sync(0xffffffffu, v[q], o);
    }
    if (lane == 0) {
#pragma unroll
        for (int q = 0; q < frame_sums; ++q) s.scratch.warp_shares[threadIdx.x / 32][q] = v[q];
    }
    __syncthreads();
    if (threadIdx.x < batch_sums) {
        const int f = threadIdx.x / frame_sums;
        const int q = threadIdx.x % frame_sums;
        constexpr int frame_warps = frame_threads / 32;
        double total = 0.0;
        for (int w = 0; w < frame_warps; ++w) total += s.scratch.warp_shares[f * frame_warps + w][q];
        s.totals[threadIdx.x] = total;
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
            const float4 v{c[0] * w, c[1] * w, c[2] * w, c[3] * w};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            atomicAdd(copy + col, v);
#else
            float* const s = reinterpret_cast<float*>(copy + col);
            atomicAdd(s, v.x);
            atomicAdd(s + 1, v.y);
            atomicAdd(s + 2, v.z);
            atomicAdd(s + 3, v.w);
#endif
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
#pragma unroll 1
    for (int p = entries - lent_entries; p < entries; ++p) {
        slots[(p - in_registers) * threads + threadIdx.x] = batch_entry_of(gram, p);
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
    cg::grid_group grid = cg::this_grid();
    const long long started = clock64();
    extern __shared__ float slots[];
    __shared__ alignas(BatchBlock) unsigned char block_bytes[sizeof(BatchBlock)];  // (no constructor runs)
    BatchBlock& s = *reinterpret_cast<BatchBlock*>(block_bytes);
    const int lane = threadIdx.x % 32;
    const int n = a.n;
    // thread t < keepers keeps x, h and d of the block's element t / 4, frame t % 4
    const int row = blockIdx.x * block_rows + threadIdx.x / batch_slots;
    const int frame = threadIdx.x % batch_slots;
    const bool keeper = threadIdx.x < keepers && row < n;  // writes its slot of d_all and x_all
    const bool kept = keeper && frame < a.batch;            // a frame's element
    const size_type at = static_cast<size_type>(frame) * n + row;  // in the [batch][n] buffers

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
        grid.sync();
        stage_x(a.x_all, xs);
        scatter_rows_batch(sys, a.m, a.batch, a.b, xs, h0_sum);
    }
    scatter_rows_batch(sys, a.m, a.batch, a.b, nullptr, ab_sum);
    __syncthreads();  // xs read by every thread before G's entries take the slots
    const Entries g = load_batch_entries(Gram{a.gram, n}, slots);
    grid.sync();
    // h0 and d0 = −h0 of the block's elements; ‖h0‖² and ‖Aᵀb‖² of each
    // frame from the blocks' shares (the second buffer: β's)
    float h = 0.0f;
    {
        double v[2] = {};
        if (kept) {
            const double ab = component(summed(ab_sum, row), frame);
            h = warm ? component(summed(h0_sum, row), frame) : static_cast<float>(-ab);
            v[0] = static_cast<double>(h) * h;
            v[1] = ab * ab;
        }
        publish_shares(s, v, a.partials + max_blocks * batch_sums);
    }
    float d = -h;
    if (keeper) slot_of(a.d_all, row, frame) = d;
    grid.sync();
    sum_shares(s, a.partials + max_blocks * batch_sums);
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
            publish_shares(s, v, a.partials);
        }
        mark(s, clock_on, bph_shares);
        grid.sync();
        mark(s, clock_on, bph_sync);
        sum_shares(s, a.partials);
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
            grid.sync();
            mark(s, clock_on, bph_x_sync);
            for (int j = blockIdx.x * threads + threadIdx.x; j < sum_floats; j += gridDim.x * threads) {
                next[j] = float4{0.0f, 0.0f, 0.0f, 0.0f};
            }
            stage_x(a.x_all, xs);
            scatter_rows_batch(sys, a.m, a.batch, a.b, xs, sum);
            __syncthreads();
            reload_lent_entries(Gram{a.gram, n}, slots);
            mark(s, clock_on, bph_scatter);
            grid.sync();
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
            double* const shares = a.partials + max_blocks * batch_sums;
            publish_shares(s, v, shares);
            grid.sync();
            sum_shares(s, shares);
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
        grid.sync();
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
                   "over %d: x sync %.0f x staged, rows scattered, G reloaded %.0f sync %.0f h loaded %.0f\n",
                   a.batch, replaced, each * s.cycles[bph_x_sync], each * s.cycles[bph_scatter],
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

int blocks_for_rows(index_t n) { return static_cast<int>((n + block_rows - 1) / block_rows); }

/// Why `kernel` cannot run n columns on exec's device (empty: it can); lets
/// it take its shared memory.
template <class Kernel>
std::string kernel_fits(const Executor& exec, Kernel* kernel_function, index_t n)
{
    const auto kernel = reinterpret_cast<const void*>(kernel_function);
    cudaFuncAttributes attributes{};
    RECON_CUDA_TRY(cudaFuncGetAttributes(&attributes, kernel));
    const int limit = device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin);
    if (shared_bytes + attributes.sharedSizeBytes > static_cast<std::size_t>(limit)) {
        return "the normal-matrix solve needs " +
               std::to_string(shared_bytes + attributes.sharedSizeBytes) +
               " bytes of shared memory per block, the device allows " + std::to_string(limit);
    }
    allow_dynamic_shared(exec, kernel, shared_bytes);
    if (!cooperative_fits(exec, kernel, threads, blocks_for_rows(n), shared_bytes)) {
        return "the normal-matrix solve's blocks do not all fit on the device at once";
    }
    return {};
}

/// The kernels a batch of `batch` frames takes: one frame's, and for 2 or
/// more (in launches of up to 4) the batch kernel.
template <class System>
std::string kernels_fit(const Executor& exec, index_t n, int batch)
{
    const bool single = batch == 1 || batch % batch_slots == 1;
    if (single) {
        std::string why = kernel_fits(exec, normal_matrix_cgnr_kernel<System>, n);
        if (!why.empty()) return why;
    }
    if (batch > 1) return kernel_fits(exec, normal_matrix_batch_kernel<System>, n);
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
        [&](const auto& sys) { return kernels_fit<std::decay_t<decltype(sys)>>(exec, n, p.batch); },
        p.system);
}

namespace {

// The one frame's workspace: four sums of the blocks' images, then the two
// slots of u.
constexpr std::size_t single_workspace_floats = 4 * max_cols + 2 * max_cols;
// A batch's: d_all, x_all and four gradients' copies (float4 per column), then
// the blocks' shares (doubles).
constexpr std::size_t batch_vector_floats = (2 + 4 * sum_copies) * batch_slots * max_cols;
constexpr std::size_t batch_workspace_floats =
    batch_vector_floats + 2 * 2 * max_blocks * batch_sums;
static_assert(batch_vector_floats % 4 == 0, "the shares start 16-byte aligned");

template <class System>
void launch_single(const Executor& exec, const System& sys, const PersistentCgnrProblem& p,
                   float* workspace)
{
    const index_t n = cols_of(p.system);
    RECON_CUDA_TRY(cudaMemsetAsync(workspace, 0, 4 * max_cols * sizeof(float), stream_of(exec)));
    Args args{p.params,
              p.residual_replacement,
              static_cast<int>(n),
              rows_of(p.system),
              p.normal_matrix.data,
              p.b.data,
              p.x.data,
              p.h.data,
              p.g.data,
              p.d.data,
              p.scalars.data,
              workspace,
              workspace + 4 * max_cols,
              std::getenv("RECON_PERSISTENT_PHASES") != nullptr ? 1 : 0};
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(normal_matrix_cgnr_kernel<System>),
                         shared_bytes);
    if (!launch_cooperative(exec, normal_matrix_cgnr_kernel<System>, dim3(blocks_for_rows(n)),
                            dim3(threads), shared_bytes, sys, args)) {
        throw std::runtime_error{"normal-matrix solve: its blocks do not all fit on the device"};
    }
}

template <class System>
void launch_batch(const Executor& exec, const System& sys, const PersistentCgnrProblem& p,
                  float* workspace)
{
    const index_t n = cols_of(p.system);
    RECON_CUDA_TRY(cudaMemsetAsync(workspace, 0, batch_vector_floats * sizeof(float),
                                   stream_of(exec)));
    auto* const vectors = reinterpret_cast<float4*>(workspace);
    BatchArgs args{p.params,
                   p.residual_replacement,
                   p.batch,
                   static_cast<int>(n),
                   rows_of(p.system),
                   p.normal_matrix.data,
                   p.b.data,
                   p.x.data,
                   p.h.data,
                   p.g.data,
                   p.d.data,
                   p.scalars.data,
                   vectors,
                   vectors + max_cols,
                   vectors + 2 * max_cols,
                   reinterpret_cast<double*>(workspace + batch_vector_floats),
                   std::getenv("RECON_PERSISTENT_PHASES") != nullptr ? 1 : 0};
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(normal_matrix_batch_kernel<System>),
                         shared_bytes);
    if (!launch_cooperative(exec, normal_matrix_batch_kernel<System>, dim3(blocks_for_rows(n)),
                            dim3(threads), shared_bytes, sys, args)) {
        throw std::runtime_error{"normal-matrix solve: its blocks do not all fit on the device"};
    }
}

}  // namespace

std::size_t normal_matrix_workspace_floats(const PersistentCgnrProblem& p)
{
    return p.batch == 1 ? single_workspace_floats : batch_workspace_floats;
}

void launch_normal_matrix_cgnr(const Executor& exec, const PersistentCgnrProblem& p,
                               float* workspace)
{
    const index_t n = cols_of(p.system);
    if (p.normal_matrix.size != static_cast<size_type>(n) * n) {
        throw std::invalid_argument{"normal-matrix solve: expected an n x n normal matrix for n = " +
                                    std::to_string(n)};
    }
    if (p.batch < 1 || p.batch > batch_slots) {
        throw std::invalid_argument{"normal-matrix solve: 1 to 4 frames a launch, found " +
                                    std::to_string(p.batch)};
    }
    std::visit(
        [&](const auto& sys) {
            if (p.batch == 1) {
                launch_single(exec, sys, p, workspace);
            } else {
                launch_batch(exec, sys, p, workspace);
            }
        },
        p.system);
}

}  // namespace recon::kernels::cuda
