// The persistent CGNR solve of 2 to 4 frames on the normal matrix G = AᵀA
// (normal_matrix_cgnr.cu solves one; normal_matrix_layout.cuh is what both
// share), the fused form without a regularizer. The frames share G and
// each pass over it: the block's 24 rows of G times 4 frames' d on the
// tensor cores, G and d each as two halves (below, at chunk_cols). What
// does not fit beside G is the image-space state: 4 frames' h and d of
// every column would take 96 registers a thread in the one-frame layout.
// So each element has one owner instead of every block keeping a copy:
// thread t < 96 of block b keeps x, h and d of element 24 b + t / 4, frame
// t % 4 (in registers), and an iteration takes two grid syncs instead of
// one:
//   u = G d for the block's rows (d of every column read from d_all, 48 KB
//   from L2, each warp its chunks); the block's share of each frame's five
//   sums over its own elements (f = dᵀu, gᵀd, hᵀu, uᵀu, hᵀh) added into the exchange's
//   totals with double atomics; grid sync; every block reads the same
//   totals (so all compute the same α and β), moves its own elements of x,
//   h and d and writes its elements of d to d_all; grid sync.
// u never leaves its block. Iterations that need β from the new gradient
// (residual replacements, cancelled expansions) exchange its two sums
// through a third sync. For the gradients from the rows of A (at the start
// and at residual replacements) G's last 48 KB of shared memory hold x
// of every column and frame, and are loaded again after; the rows' terms
// go straight into global sums with four-float atomics (one per entry for
// all frames, into one of 8 copies of the sum). The start's norms, too,
// come from the blocks' shares. A replacement once x has settled takes G
// instead of the rows (gram_route_ratio): h = h_last + G (x − x_last).

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "grid_barrier.cuh"
#include "half_pairs.cuh"
#include "kernels/cgnr_scalars.hpp"
#include "launch.cuh"
#include "normal_matrix_batch_cgnr.cuh"
#include "normal_matrix_layout.cuh"
#include "system_kernels.cuh"

namespace recon::kernels::cuda {
namespace {

using namespace normal_matrix;

constexpr int batch_slots = normal_matrix_batch_frames;  // frames of a launch (x_all: one float4 a column)
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
// The batch kernel's entries of G are the A operands of the tensor cores'
// half-precision products (mma.m16n8k16, f32 accumulators): G d for the
// block's 24 rows and 4 frames as 16-column chunks of G times 16 x 8 chunks
// of d, 8 columns = 4 frames' d_hi and d_lo. Each entry is two halves, hi =
// fp16(2^s G) and lo = fp16(2^s G − hi), with s a power of two per row that
// puts the row's largest entry in [2^14, 2^15); likewise d per frame with an
// exponent from a bound on |d| (DirectionScale). hi + lo keep G and d to
// 2^-22 of each value (two bits short of the float's 2^-24), the products
// hi·hi, hi·lo and lo·hi are exact (11 x 11 bits) and summed in the f32
// accumulators (lo·lo, ≤ 2^-22, comes along in the same instruction).
// Against 4 FMAs per entry in float (576 instructions a thread each
// iteration, ~3.2k issue cycles of the product's ~4.4k: history v22), the
// product is 36 tensor instructions a warp (history v24). The halves' range:
// within a row, entries more than ~2^17 below its largest keep fewer bits
// (lo no longer normal), down to an absolute ~2^-40 of the largest; likewise
// d's entries below its bound.
constexpr int chunk_cols = 16;                         // k of one mma
constexpr int chunks = max_cols / chunk_cols;          // 192
constexpr int warp_chunks = chunks / warps;            // 12: warp w takes chunks w, w + 16, ...
constexpr int chunk_words = 12;                        // a lane's 32-bit words of a chunk: 6 hi, 6 lo
constexpr int chunk_quads = chunk_words / 4;           // as 16-byte loads
constexpr int register_chunks = 3;                     // of each warp's 12, the rest in shared memory
constexpr int shared_chunks = warp_chunks - register_chunks;
constexpr std::size_t chunk_slot_bytes = chunk_quads * threads * sizeof(uint4);  // 24 KB
constexpr std::size_t batch_shared_bytes = shared_chunks * chunk_slot_bytes;     // 216 KB
static_assert(chunks % warps == 0, "every warp takes as many chunks");
// The last two chunks in shared memory (48 KB), lent to x of every column
// and frame while a gradient is formed from the rows of A: gathered from L2
// instead, 125 SMs' 1.8M requests for the same 48 KB queued there (the
// scatter 63k cycles without its atomics, history v18).
constexpr int lent_chunks = 2;
static_assert(lent_chunks * chunk_slot_bytes == max_cols * sizeof(float4),
              "the lent chunks hold x of every column and frame");
static_assert(keepers % 32 == 0, "the keepers fill whole warps");
// A residual replacement forms h = Aᵀ(A x − b) from the rows of A (~60–70k
// cycles: 1.8M four-float atomics on paper_large) unless every frame's x
// moved by ‖Δx‖ ≤ 2^-8 ‖x‖ since the last replacement (x_last, h_last): then
// h = h_last + G Δx, one more product on the tensor cores (~9k cycles with
// its two grid syncs). Its error is proportional to Δx, not to x: G's and
// Δx's halves keep 2^-22 of each value and the f32 sums 2^-24 of the terms,
// so h carries ≲ 2^-22 ‖G‖ ‖Δx‖ ≤ 2^-30 ‖G‖ ‖x‖, against the ~2^-24 ‖Aᵀb‖
// of h formed whole as G x − Aᵀb (which missed the ill-conditioned test's
// 1e-4, docs/gpu-performance.md, v13), and each further replacement adds
// its smaller Δx's share. The first replacement of a cold start (x_last =
// 0, Δx = x) always takes the rows; so does any frame's non-finite Δx.
constexpr double gram_route_ratio = 0x1p-16;  // of ‖Δx‖² to ‖x‖²
// Where a scaled value sits: the largest entry of a row of G in
// [2^14, 2^15), d of a frame below 2^14 (its bound may be loose by the
// iterations' count, hence the room below fp16's 65,504).
constexpr int row_top_exponent = 15;
constexpr int direction_top_exponent = 14;

/// The block's G rows 24 b + r, as the mma's A operand: pair q < 6 of a
/// lane's chunk c is the entries at (fragment_row(q), fragment_col(c, q))
/// and the next column, its hi halves in word hi_word(q), its lo halves in
/// lo_word(q). Rows 0–15 are one 16-row tile (pairs 0–3: hi in words 0–3,
/// lo in words 4–7), rows 16–23 half of another (pairs 4–5), whose other
/// half is the same rows' lo halves (words 8–11, in the tile's register
/// order), so that each 16-byte load is one operand as it stands.
/// fragment_kind(q): which of the lane's three rows pair q lies in (g,
/// g + 8 or 16 + g).
__device__ __forceinline__ int fragment_kind(int q)
{
    return q == 0 || q == 2 ? 0 : q == 1 || q == 3 ? 1 : 2;
}
__device__ __forceinline__ int fragment_row(int q)
{
    return static_cast<int>(threadIdx.x % 32) / 4 + 8 * fragment_kind(q);
}
__device__ __forceinline__ int fragment_col(int chunk, int q)
{
    const int t = static_cast<int>(threadIdx.x % 4);
    return chunk * chunk_cols + 2 * t + (q == 2 || q == 3 || q == 5 ? 8 : 0);
}
__device__ __forceinline__ int hi_word(int q) { return q < 4 ? q : 8 + 2 * (q - 4); }
__device__ __forceinline__ int lo_word(int q) { return q < 4 ? 4 + q : 9 + 2 * (q - 4); }
__device__ __forceinline__ int warp_chunk(int j) { return static_cast<int>(threadIdx.x / 32) + warps * j; }

/// Quad p of the thread's shared chunk j (j ≥ register_chunks).
template <class Quad>  // uint4 or const uint4
__device__ __forceinline__ Quad& chunk_quad(Quad* slots, int j, int p)
{
    return slots[((j - register_chunks) * chunk_quads + p) * threads + threadIdx.x];
}

__device__ __forceinline__ void load_quads(const uint4* slots, int j, unsigned (&w)[chunk_words])
{
#pragma unroll
    for (int p = 0; p < chunk_quads; ++p) {
        const uint4 v = chunk_quad(slots, j, p);
        w[4 * p] = v.x;
        w[4 * p + 1] = v.y;
        w[4 * p + 2] = v.z;
        w[4 * p + 3] = v.w;
    }
}
__device__ __forceinline__ void store_quads(uint4* slots, int j, const unsigned (&w)[chunk_words])
{
#pragma unroll
    for (int p = 0; p < chunk_quads; ++p) {
        chunk_quad(slots, j, p) = uint4{w[4 * p], w[4 * p + 1], w[4 * p + 2], w[4 * p + 3]};
    }
}

/// The thread's words of G held in registers: chunks 0 to
/// register_chunks − 1 (the others in the kernel's shared slots, chunk_quad).
struct TensorEntries {
    unsigned reg[register_chunks][chunk_words];
};

/// Words hi_word(q) and lo_word(q) of a chunk from the pair (v0, v1) of
/// row exponent e.
__device__ __forceinline__ void put_pair(unsigned (&w)[chunk_words], int q, float v0, float v1, int e)
{
    const HalfPair p0 = split_half(ldexpf(v0, e));
    const HalfPair p1 = split_half(ldexpf(v1, e));
    w[hi_word(q)] = pack_halves(p0.hi, p1.hi);
    w[lo_word(q)] = pack_halves(p0.lo, p1.lo);
}

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
    __half* d_all;       // [chunks][32][4] d of every column and frame as the mma's B operand
                         // (direction_slot; zeroed, so 0 past n and the batch)
    float4* x_all;       // [max_cols] x of every column, for the gradients from the rows of A
                         // (each block stages it in shared memory); x_last of the replacements
    float4* h_last;      // [max_cols] h of every column at the last replacement
    float4* image_sums;  // [4][sum_copies][max_cols] zeroed: Aᵀb, h0 of a warm start, two for the
                         // replacements
    double* totals;      // [3][batch_sums][total_stride]: the exchanges' totals (exchange_totals)
    int phases;
    int rows_only;       // every replacement from the rows (RECON_PERSISTENT_REPLACEMENT=rows)
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
    bph_route, bph_gram, bph_scatter, bph_reload, bph_sum_sync, bph_load_h, bph_count
};

struct BatchBlock {
    union {
        float rows[warps][keepers];                     // the warps' products, [row][frame]
        double shares[keepers / 32][batch_sums];        // the keeper warps' shares
    } scratch;
    double totals[batch_sums];
    CgnrScalars state[batch_slots];
    unsigned row_max[block_rows];  // the largest |G| of each row (float bits) while G is loaded
    int row_exponent[block_rows];  // G's row r scaled by 2^row_exponent[r]
    float alpha[batch_slots];
    float beta[batch_slots];
    int flags[batch_slots];
    int running[batch_slots];
    int next_replacement;  // the iteration k + 1 that replaces h next
    int gram_replacements;  // of them, those from G (thread 0 counts)
    float parked[keepers];  // u of the keepers during a replacement from G
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

/// Where d of (column, frame) sits in the B operands: chunk column / 16,
/// lane 4 f + t (d_hi; 4 (f + 4) + t for d_lo) with t the column's pair in
/// its half of the chunk, register half (column % 16) / 8, half column % 2.
__device__ __forceinline__ int direction_slot(int column, int lane_frame)
{
    const int k = column % chunk_cols;
    const int lane = 4 * lane_frame + (k % 8) / 2;
    return ((column / chunk_cols * 32 + lane) * 2 + k / 8) * 2 + k % 2;
}

/// The keeper's d of (column, frame), scaled by 2^e, as its hi and lo halves.
__device__ __forceinline__ void put_direction(__half* d_all, int column, int frame, float d, int e)
{
    const HalfPair p = split_half(times_power_of_two(d, e));
    d_all[direction_slot(column, frame)] = p.hi;
    d_all[direction_slot(column, frame + batch_slots)] = p.lo;
}

/// A keeper's bound on |d| of its frame and the exponent d is stored with
/// (every keeper of a frame computes the same, in registers: on thread f
/// of the scalar code the bound took ~150 cycles an iteration while the
/// block waited). d_{k+1} from β_k and ‖g_{k+1}‖: |d_{k+1}| ≤ ‖g_{k+1}‖ +
/// |β| max |d_k|. The margins cover ‖g_{k+1}‖² expanded (within ~1e-4 of
/// the stored vector's, cgnr_scalars.hpp) and the direction step's
/// rounding; a margin on the whole bound would compound over the
/// iterations. Loose by ≤ 2√k against ‖d_k‖ in exact arithmetic.
struct DirectionScale {
    double bound = 0.0;
    int exponent = 0;

    __device__ __forceinline__ void set(double b)
    {
        bound = b;
        exponent = exponent_below(b, direction_top_exponent);
    }
    /// gg = ‖g_{k+1}‖², beta = β_k as the elements take it.
    __device__ __forceinline__ void step(double gg, float beta)
    {
        set(root_above(gg) + (1.0 + 0x1p-20) * fabs(static_cast<double>(beta)) * bound);
    }
};

/// (G d) of the block's rows for every frame: keeper t gets row t / 4 of
/// frame t % 4 (the other threads 0); G's words in g and `slots`;
/// d_exponent: its frame's. Two barriers.
__device__ __forceinline__ float batch_rows_times(BatchBlock& s, const TensorEntries& g,
                                                  const uint4* slots, const __half* d_all,
                                                  int d_exponent, bool clock_on)
{
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const uint2* const b = reinterpret_cast<const uint2*>(d_all);
    // rows 0–15 (hi, then lo, into the same sums); rows 16–23 with their hi
    // halves as the tile's rows 0–7 and their lo halves as rows 8–15, so
    // that no row of a tile is zero (3 mma a chunk)
    float top[4] = {}, bottom[4] = {};
#pragma unroll
    for (int j = 0; j < warp_chunks; ++j) {
        const uint2 bv = __ldcg(b + warp_chunk(j) * 32 + lane);
        unsigned w[chunk_words];
        if (j < register_chunks) {
#pragma unroll
            for (int q = 0; q < chunk_words; ++q) w[q] = g.reg[j < register_chunks ? j : 0][q];
        } else {
            load_quads(slots, j, w);
        }
        mma_16816(top, w[0], w[1], w[2], w[3], bv);
        mma_16816(top, w[4], w[5], w[6], w[7], bv);
        mma_16816(bottom, w[8], w[9], w[10], w[11], bv);
    }
    mark(s, clock_on, bph_products);
    // columns f (d_hi) and f + 4 (d_lo) of a frame are lanes t and t + 2
    float v[6] = {top[0], top[1], top[2], top[3], bottom[0] + bottom[2], bottom[1] + bottom[3]};
#pragma unroll
    for (int i = 0; i < 6; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], 2);
    const int t = lane % 4;
    if (t < 2) {
        const int r = lane / 4;
        float* const to = s.scratch.rows[warp];
        *reinterpret_cast<float2*>(to + r * batch_slots + 2 * t) = float2{v[0], v[1]};
        *reinterpret_cast<float2*>(to + (r + 8) * batch_slots + 2 * t) = float2{v[2], v[3]};
        *reinterpret_cast<float2*>(to + (r + 16) * batch_slots + 2 * t) = float2{v[4], v[5]};
    }
    __syncthreads();
    float u = 0.0f;
    if (threadIdx.x < keepers) {
        for (int w = 0; w < warps; ++w) u += s.scratch.rows[w][threadIdx.x];
        u = times_power_of_two(u, -(s.row_exponent[threadIdx.x / batch_slots] + d_exponent));
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

/// x of every column from x_all into the lent chunks xs, for the block's
/// scatter (x_all was written before a grid sync). Ends with a barrier.
__device__ __forceinline__ void stage_x(const float4* x_all, float4* xs)
{
    for (int j = threadIdx.x; j < max_cols; j += threads) xs[j] = __ldcg(x_all + j);
    __syncthreads();
}

/// Chunk j's pairs as floats (word hi_word(q) the pair's first entry,
/// lo_word(q) its second), and the largest |G| of the thread's rows g, g + 8, 16 + g.
__device__ __forceinline__ void gram_chunk(const float* gram, int n, int j,
                                           unsigned (&w)[chunk_words], float (&most)[3])
{
    const int first = static_cast<int>(blockIdx.x) * block_rows;
#pragma unroll
    for (int q = 0; q < 6; ++q) {
        const int col = fragment_col(warp_chunk(j), q);
        const float v0 = gram_entry(Gram{gram, n}, first + fragment_row(q), col);
        const float v1 = gram_entry(Gram{gram, n}, first + fragment_row(q), col + 1);
        w[hi_word(q)] = __float_as_uint(v0);
        w[lo_word(q)] = __float_as_uint(v1);
        most[fragment_kind(q)] = fmaxf(most[fragment_kind(q)], fmaxf(fabsf(v0), fabsf(v1)));
    }
}

/// Chunk words as floats (gram_chunk) split into halves with the block's row exponents.
__device__ __forceinline__ void split_chunk(const BatchBlock& s, unsigned (&w)[chunk_words])
{
#pragma unroll
    for (int q = 0; q < 6; ++q) {
        put_pair(w, q, __uint_as_float(w[hi_word(q)]), __uint_as_float(w[lo_word(q)]),
                 s.row_exponent[fragment_row(q)]);
    }
}

/// The thread's entries of G: a first pass finds each row's largest |G|
/// (the entries kept as floats meanwhile), then each chunk is split into
/// halves in place. The chunks in shared memory in loops of their own
/// (unrolled, they took the iteration's registers). Three barriers.
__device__ __forceinline__ TensorEntries load_entries(BatchBlock& s, const float* gram, int n,
                                                      uint4* slots)
{
    TensorEntries g{};
    if (threadIdx.x < block_rows) s.row_max[threadIdx.x] = 0u;
    __syncthreads();
    float most[3] = {};
#pragma unroll
    for (int j = 0; j < register_chunks; ++j) gram_chunk(gram, n, j, g.reg[j], most);
#pragma unroll 1
    for (int j = register_chunks; j < warp_chunks; ++j) {
        unsigned w[chunk_words];
        gram_chunk(gram, n, j, w, most);
        store_quads(slots, j, w);
    }
    // (non-negative floats order as their bits; fmaxf passes over NaNs)
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        atomicMax(&s.row_max[threadIdx.x % 32 / 4 + 8 * i], __float_as_uint(most[i]));
    }
    __syncthreads();
    if (threadIdx.x < block_rows) {
        s.row_exponent[threadIdx.x] =
            exponent_below(__uint_as_float(s.row_max[threadIdx.x]), row_top_exponent);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < register_chunks; ++j) split_chunk(s, g.reg[j]);
#pragma unroll 1
    for (int j = register_chunks; j < warp_chunks; ++j) {
        unsigned w[chunk_words];
        load_quads(slots, j, w);
        split_chunk(s, w);
        store_quads(slots, j, w);
    }
    return g;
}

/// The thread's lent chunks of G loaded again from device memory (with the
/// block's row exponents) after a scatter; a barrier must precede (every
/// thread's reads of x done). A loop of its own: unrolled, it took
/// registers from the iteration's (ptxas spilled 300 bytes).
__device__ __forceinline__ void reload_lent_chunks(const BatchBlock& s, const float* gram, int n,
                                                   uint4* slots)
{
#pragma unroll 1
    for (int j = warp_chunks - lent_chunks; j < warp_chunks; ++j) {
        unsigned w[chunk_words];
        float most[3] = {};
        gram_chunk(gram, n, j, w, most);
        split_chunk(s, w);
        store_quads(slots, j, w);
    }
}

/// Thread f stores frame f's state and makes its outcome known to the
/// block (a barrier must follow); from the state in registers, not read
/// back from shared memory.
__device__ __forceinline__ void publish_frame(BatchBlock& s, int f, const CgnrScalars& state, int flags)
{
    s.state[f] = state;
    s.flags[f] = flags;
    s.alpha[f] = static_cast<float>(state.alpha);
    s.beta[f] = static_cast<float>(state.beta);
    s.running[f] = state.status == SolveStatus::running ? 1 : 0;
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

/// Whether a replacement takes G: every frame's ‖Δx‖² (s.totals, sum 0)
/// within gram_route_ratio of its ‖x‖² (sum 1); a barrier must precede.
__device__ __forceinline__ bool gram_route(const BatchBlock& s, const BatchArgs& a)
{
    bool settled = a.rows_only == 0;
#pragma unroll
    for (int f = 0; f < batch_slots; ++f) {
        settled = settled && s.totals[f * frame_sums] <= gram_route_ratio * s.totals[f * frame_sums + 1];
    }
    return settled;
}

template <class System>
__global__ void __launch_bounds__(threads, 1) normal_matrix_batch_kernel(System sys, BatchArgs a)
{
    const long long started = clock64();
    extern __shared__ uint4 slots[];  // batch_shared_bytes
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
    float4* const xs = reinterpret_cast<float4*>(&chunk_quad(slots, warp_chunks - lent_chunks, 0) -
                                                 threadIdx.x);
    if (warm) {
        if (keeper) slot_of(a.x_all, row, frame) = x;
        grid_barrier();
        stage_x(a.x_all, xs);
        scatter_rows_batch(sys, a.m, a.batch, a.b, xs, h0_sum);
    }
    scatter_rows_batch(sys, a.m, a.batch, a.b, nullptr, ab_sum);
    __syncthreads();  // xs read by every thread before G's entries take the slots
    TensorEntries g = load_entries(s, a.gram, n, slots);
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
            slot_of(a.h_last, row, frame) = h;  // h_last of the first replacement (x_last: x0 in x_all)
        }
        add_shares(s, v, a, exchange);
    }
    float d = -h;
    grid_barrier();
    read_totals(s, a, exchange++);
    if (threadIdx.x < batch_slots) {
        const int f = threadIdx.x;
        CgnrScalars state{};
        if (f < a.batch) {
            state = a.scalars[f];
            cgnr_scalars_begin(state, a.params, s.totals[f * frame_sums], s.totals[f * frame_sums + 1]);
        } else {
            state.status = SolveStatus::max_iterations;  // (no frame: never runs)
        }
        publish_frame(s, f, state, 0);
    }
    __syncthreads();
    // d0 in the B operands once its exponent is known: |d0| ≤ ‖h0‖
    DirectionScale scale;
    scale.set(root_above(s.totals[frame * frame_sums]));
    if (keeper) put_direction(a.d_all, row, frame, d, scale.exponent);
    grid_barrier();

    const bool clock_on = a.phases != 0 && blockIdx.x == 0 && threadIdx.x == 0;
    if (clock_on) {
        for (int p = 0; p < bph_count; ++p) s.cycles[p] = 0;
        s.last = clock64();
        printf("normal-matrix batch kernel, %d frames, block 0's cycles from its start to the first "
               "iteration: %lld\n", a.batch, s.last - started);
    }
    int k = 0;
    int replaced = 0;
    if (threadIdx.x == 0) {  // (a barrier follows in the loop)
        s.next_replacement = a.replacement;
        s.gram_replacements = 0;
    }
    for (; any_frame(s.running, 1); ++k) {
        // u_k = G d_k, the block's rows of every frame
        float u = batch_rows_times(s, g, slots, a.d_all, scale.exponent, clock_on);
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
        // every a.replacement-th iteration (0: never), from a count in
        // shared memory: a modulo here cost ~300 cycles of the scalar
        // code's path, a count in a register a spill (history v25)
        const bool replace = k + 1 == s.next_replacement;
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
            publish_frame(s, f, state, flags);
        }
        __syncthreads();
        mark(s, clock_on, bph_scalars);
        if (replace && threadIdx.x == 0) s.next_replacement += a.replacement;  // (read before the barrier)
        if (!any_frame(s.flags, step_taken)) break;  // every frame stopped (every block alike)
        // x_{k+1} = x_k + α_k d_k;  h_{k+1} = h_k + α_k u_k
        const int flags = s.flags[frame];
        if (kept && (flags & step_taken) != 0) {
            x = stepped(x, s.alpha[frame], d);
            h = stepped(h, s.alpha[frame], u);
        }
        if (replace) {
            // h_{k+1} consistent with x_{k+1}, against the recurrence's
            // drift: Δx since the last replacement (x_last in x_all, each
            // keeper its own slot) and x_{k+1} exchanged as ‖Δx‖², ‖x‖²
            float dx = 0.0f;
            if (keeper) {
                dx = x - slot_of(a.x_all, row, frame);
                slot_of(a.x_all, row, frame) = x;
            }
            mark(s, clock_on, bph_step);
            {
                double v[2] = {};
                if (kept) {
                    v[0] = static_cast<double>(dx) * dx;
                    v[1] = static_cast<double>(x) * x;
                }
                add_shares(s, v, a, exchange);
            }
            grid_barrier();
            read_totals(s, a, exchange++);
            mark(s, clock_on, bph_route);
            if (gram_route(s, a)) {
                // h_{k+1} = h_last + G Δx: Δx in d_all (free until the
                // direction step, which comes after the β exchange's grid
                // sync); u_k waits in shared memory meanwhile (its register
                // is lent to the product)
                if (threadIdx.x < keepers) s.parked[threadIdx.x] = u;
                const int e = exponent_below(root_above(s.totals[frame * frame_sums]),
                                             direction_top_exponent);
                if (keeper) put_direction(a.d_all, row, frame, dx, e);
                if (threadIdx.x == 0) ++s.gram_replacements;
                grid_barrier();
                const float du = batch_rows_times(s, g, slots, a.d_all, e, false);
                if (kept && (flags & step_taken) != 0) h = slot_of(a.h_last, row, frame) + du;
                if (threadIdx.x < keepers) u = s.parked[threadIdx.x];
                mark(s, clock_on, bph_gram);
            } else {
                // h_{k+1} = Aᵀ(A x_{k+1} − b) from the rows; two sums
                // alternate, each such replacement clears the next one's
                float4* const sum = a.image_sums + (2 + replaced % 2) * sum_floats;
                float4* const next = a.image_sums + (2 + (replaced + 1) % 2) * sum_floats;
                ++replaced;
                for (int j = blockIdx.x * threads + threadIdx.x; j < sum_floats; j += gridDim.x * threads) {
                    next[j] = float4{0.0f, 0.0f, 0.0f, 0.0f};
                }
                stage_x(a.x_all, xs);
                scatter_rows_batch(sys, a.m, a.batch, a.b, xs, sum);
                __syncthreads();
                mark(s, clock_on, bph_scatter);
                reload_lent_chunks(s, a.gram, n, slots);
                __syncthreads();  // (for the clock: every thread's entries back)
                mark(s, clock_on, bph_reload);
                grid_barrier();
                mark(s, clock_on, bph_sum_sync);
                if (kept && (flags & step_taken) != 0) h = component(summed(sum, row), frame);
                __syncthreads();  // (for the clock: every keeper's h loaded)
                mark(s, clock_on, bph_load_h);
            }
            if (kept) slot_of(a.h_last, row, frame) = h;  // h_last of the next replacement
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
                    CgnrScalars state = s.state[f];
                    cgnr_scalars_end(state, a.params, s.totals[f * frame_sums],
                                     s.totals[f * frame_sums + 1]);
                    publish_frame(s, f, state, s.flags[f] | beta_known);
                }
            }
            __syncthreads();
        }
        mark(s, clock_on, bph_beta);
        // d_{k+1} = −g_{k+1} + β_k d_k of the frames still running
        if (kept && s.running[frame] != 0) {
            d = next_direction(h, s.beta[frame], d);
            scale.step(s.state[frame].gg, s.beta[frame]);
        }
        if (keeper) put_direction(a.d_all, row, frame, d, scale.exponent);
        mark(s, clock_on, bph_direction);
        grid_barrier();
        mark(s, clock_on, bph_sync_after);
    }
    if (clock_on && k > 0) {
        const double per = 1.0 / k;
        const int all = replaced + s.gram_replacements;  // the replacements, from the rows or G
        printf("normal-matrix batch kernel, %d frames, block 0's cycles per iteration over %d: "
               "products %.0f row sums %.0f shares %.0f sync %.0f totals %.0f scalars %.0f step %.0f "
               "(replacements apart) beta %.0f direction %.0f sync %.0f (%d replacements)\n",
               a.batch, k, per * s.cycles[bph_products], per * s.cycles[bph_row_sums],
               per * s.cycles[bph_shares], per * s.cycles[bph_sync], per * s.cycles[bph_totals],
               per * s.cycles[bph_scalars], per * s.cycles[bph_step],
               per * s.cycles[bph_beta], per * s.cycles[bph_direction],
               per * s.cycles[bph_sync_after], all);
        if (all > 0) {
            // (a part's mean over the replacements that took it)
            const auto over = [](long long c, int count) {
                return count > 0 ? static_cast<double>(c) / count : 0.0;
            };
            printf("normal-matrix batch kernel, %d frames, block 0's cycles per residual replacement "
                   "over %d: Δx exchanged %.0f; over the %d from G: G Δx %.0f; over the %d from the "
                   "rows: x staged, rows scattered %.0f G reloaded %.0f sync %.0f h loaded %.0f\n",
                   a.batch, all, over(s.cycles[bph_route], all), s.gram_replacements,
                   over(s.cycles[bph_gram], s.gram_replacements), replaced,
                   over(s.cycles[bph_scatter], replaced), over(s.cycles[bph_reload], replaced),
                   over(s.cycles[bph_sum_sync], replaced), over(s.cycles[bph_load_h], replaced));
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

static_assert(chunks * 32 * 4 * sizeof(__half) == max_cols * sizeof(float4),
              "d_all takes the bytes of a float4 per column");
// A batch's: d_all (halves), x_all, h_last and four gradients' copies (float4 per
// column), then the exchanges' totals (doubles). All zeroed at the start.
constexpr std::size_t batch_vector_floats = (3 + 4 * sum_copies) * batch_slots * max_cols;
constexpr std::size_t batch_workspace_floats =
    batch_vector_floats + 2 * 3 * batch_sums * total_stride;
static_assert(batch_vector_floats % 4 == 0, "the totals start 16-byte aligned");

/// Whether every residual replacement forms h from the rows of A
/// (RECON_PERSISTENT_REPLACEMENT = `rows`, for comparing) rather than from
/// G once x has settled (`auto`, the default; gram_route_ratio).
bool replacement_from_rows()
{
    return environment_choice("RECON_PERSISTENT_REPLACEMENT", {"auto", "rows"}) == 1;
}

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
    args.d_all = reinterpret_cast<__half*>(vectors);
    args.x_all = vectors + max_cols;
    args.h_last = vectors + 2 * max_cols;
    args.image_sums = vectors + 3 * max_cols;
    args.totals = totals;
    args.rows_only = replacement_from_rows() ? 1 : 0;
    launch_on_rows(exec, batch_shared_bytes, normal_matrix_batch_kernel<System>, n, sys, args);
}

}  // namespace

std::string normal_matrix_batch_fits(const Executor& exec, const PersistentCgnrProblem& p)
{
    return std::visit(
        [&](const auto& sys) {
            return kernel_fits(exec, normal_matrix_batch_kernel<std::decay_t<decltype(sys)>>,
                               cols_of(p.system), batch_shared_bytes);
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
