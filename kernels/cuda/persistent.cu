// The persistent cooperative CGNR kernel (see kernels/persistent.hpp for the
// scheme). One block of 1024 threads per SM. Per block, in shared memory:
// d, the scatter image (reused for e between passes), with a regularizer x
// and its state, and as many of the block's rows as fit; in registers: h,
// g and u for the thread's elements of the batch (and without a
// regularizer, the block's own slice of x: OwnedX). All blocks compute the
// image-space part identically (same data, same order of operations), so
// they agree on every scalar without exchanging more than the scattered
// image.
//
// The batch's images are interleaved pixel by pixel, BMAX slots per pixel
// (frames past the batch stay zero): a row's gather of d reads every
// frame's value in one vector load, and since BMAX divides the block size,
// each thread's elements belong to one frame, so its dot-product partials
// and scalars are its frame's alone.
//
// Each block owns a contiguous range of rows. Its share of Aᵀc is summed in
// 32-bit fixed point with native shared-memory integer atomics: sm_90 has
// no shared-memory float add, and its compare-and-swap loops cost ~5 µs per
// iteration on the paper matrix (measured against ~1.5 µs for integer adds).
// The scale is a power of two per block, frame and pass, chosen from the
// largest |c| of the block's rows and the largest column sum of |A_ij| over
// the block's rows, so that no partial sum can exceed 2^30. Integer sums do
// not depend on the order of the adds, so each block's image is
// reproducible.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "grid_barrier.cuh"
#include "kernels/backends.hpp"
#include "kernels/cgnr_scalars.hpp"
#include "kernels/stencils.hpp"
#include "normal_matrix_cgnr.cuh"
#include "persistent.cuh"
#include "system_kernels.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int block_threads = 1024;
constexpr int max_persistent_blocks = 256;
constexpr int warps = block_threads / 32;

/// Everything but the system view, as kernel arguments.
struct Args {
    RegularizerTerms terms;
    ImageGrid grid;
    CgnrParams params;
    int cgls1;
    int replacement;
    int batch;
    int stateful;  // number of terms with state
    index_t m;
    index_t n;
    const float* b;
    float* x;
    float* r;
    float* q;
    float* h;
    float* g;
    float* d;
    CgnrScalars* scalars;
    float* ubuf;     // 3 slots of BMAX * n floats
    float* xbuf;     // BMAX * n floats: x for the residual pass when x is not in shared memory
    float* partial;  // two-phase reduction: [block][BMAX * n]; else null
    unsigned row_bytes;  // dynamic shared memory after the images, for staged rows
    int rows_mode;       // RowsMode
    int phases;          // print block 0's cycles per phase (RECON_PERSISTENT_PHASES)
    int one_reduction;   // 0: two block reductions per iteration everywhere
                         // (RECON_PERSISTENT_TWO_REDUCTIONS, for comparing)
    int x_shared;        // x in shared memory (one frame, a regularizer, or blocks too
                         // few to own x: x_in_shared); else see OwnedX
};

/// Where an iteration's time goes, as block 0's thread 0 sees it (waits at
/// barriers included): the diagnostic behind docs/gpu-performance.md.
enum Phase : int {
    ph_rows,       // the normal pass
    ph_flush,      // the block image into the global one
    ph_sync,       // the grid sync (waits for the slowest block)
    ph_load,       // the summed image into registers
    ph_partials,   // the element loops of the dot-product steps, up to their first barrier
    ph_alpha,      // α (and β in the one-reduction step) from the partial sums (warp 0), published
    ph_step,       // x, h (and any extra pass)
    ph_beta,       // g, two dot products, β and the stop tests
    ph_direction,  // d (and the regularizer state)
    ph_count
};
/// Per phase, the largest count of any block (the wait at the grid sync
/// follows the slowest block).
__device__ unsigned long long phase_max_cycles[ph_count];

struct PhaseClock {
    long long* cycles;  // [ph_count], shared
    long long* last;    // shared
    bool on;

    __device__ __forceinline__ void start()
    {
        if (on) *last = clock64();
    }
    __device__ __forceinline__ void mark(Phase p)
    {
        if (on) {
            const long long now = clock64();
            cycles[p] += now - *last;
            *last = now;
        }
    }
};

/// How the blocks treat their rows (RECON_PERSISTENT_ROWS, for comparing
/// the paths; `rows_automatic` is always the fastest that fits: the normal
/// matrix where persistent_normal_matrix_applies, else staged rows).
enum RowsMode : int {
    rows_automatic = 0,  // staged in shared memory where they fit, fixed-point scatter
    rows_staged,         // the same, and never the normal matrix
    rows_from_system,    // read (or made) every pass, fixed-point scatter
    rows_float_atomics,  // read every pass, float compare-and-swap scatter
};

enum class Pass {
    normal,    // c = A d (q = c for CGLS1), scatter c: u = Aᵀ A d
    residual,  // c = A x − b (r = c), scatter c: h = Aᵀ r
    cgls1_r,   // r += α q (running frames), scatter r: h = Aᵀ r
    adjoint_b, // scatter b: Aᵀ b, the reference of the relative stop test
};

/// The images below are [n][BMAX] (pixel i of frame f at i·BMAX + f).
struct Shared {
    float* d;
    float* acc;    // scatter image between passes (fixed point when
                   // Rows::fixed_point), e within an iteration
    float* x;      // with a regularizer (its stencils read x); else null: see OwnedX
    float* state;  // [stateful] images
    float* sums;   // [block_threads] partial sums of the two-phase reduction
    unsigned* max_bits;    // [2][BMAX] bits of max |c| per frame, by pass parity
    float* pass_scale;     // [2][BMAX] fixed-point scale of each frame's pass, by parity
    unsigned* d_max_bits;  // [BMAX] bits of max |d| per frame, for the next normal pass
};

/// The block's rows: [first, first + count). With `fixed_point`, the
/// scatter adds integers; the passes that first find max|c| (all but the
/// normal pass) read c back from where their first sweep left it (r, or b)
/// to scatter it. The first `staged` rows (all of them where they fit, else
/// as many slices of 32 as fit) are copied (generated, for rows made on the
/// fly) once into shared memory as ELLPACK-T ([width][staged], padded with
/// zero weights), so that a pass reads no matrix bytes from L2 for them.
struct Rows {
    index_t first;
    index_t count;
    index_t width;
    int fixed_point;
    index_t staged;
    float bound;      // max over columns of Σ |A_ij| over the block's rows
    float row_bound;  // max over the block's rows of Σ |A_ij|: |(A d)_i| ≤ row_bound · max|d|
    float* val;
    unsigned short* col;
};

/// Calls f(col, w) for every entry of the block's local row l: from shared
/// memory when staged, else from the system (stored rows read from L2, or
/// rows made on the fly).
template <class System, class F>
__device__ __forceinline__ void block_row(const System& sys, const Rows& rows, index_t l, F&& f)
{
    if (l < rows.staged) {
        for (index_t j = 0, k = l; j < rows.width; ++j, k += rows.staged) {
            f(static_cast<index_t>(rows.col[k]), rows.val[k]);
        }
    } else {
        device_row(sys, rows.first + l, f);
    }
}

/// a[frame] for a frame known only at run time (no local-memory indexing).
template <int BMAX, class T>
__device__ __forceinline__ T of_frame(const T (&a)[BMAX], int frame)
{
    T out = a[0];
#pragma unroll
    for (int f = 1; f < BMAX; ++f) {
        if (f == frame) out = a[f];
    }
    return out;
}

/// The frame of this thread's elements (BMAX divides the block size).
template <int BMAX>
__device__ __forceinline__ int thread_frame()
{
    return static_cast<int>(threadIdx.x % BMAX);
}

/// Every frame's value of pixel `p` of an interleaved image, in one load;
/// ThroughL2 for global memory written by other blocks since the last grid
/// sync (an SM's L1 may hold an older copy).
template <int BMAX, bool ThroughL2 = false>
__device__ __forceinline__ void load_frames(const float* p, float (&v)[BMAX])
{
    const auto load = [](const auto* q) { return ThroughL2 ? __ldcg(q) : *q; };
    if constexpr (BMAX == 4) {
        const float4 t = load(reinterpret_cast<const float4*>(p));
        v[0] = t.x;
        v[1] = t.y;
        v[2] = t.z;
        v[3] = t.w;
    } else {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) v[b] = load(p + b);
    }
}

/// Where frame b's entry of column col lies in the scatter image. Unlike
/// the other images it is frame-major, so that a warp's adds for one frame
/// spread over the banks as its columns do (interleaved, columns 8 apart
/// would share a bank).
__device__ __forceinline__ index_t acc_at(const Args& a, index_t col, int b)
{
    return b * a.n + col;
}

/// The scatter image's entry of element e of the interleaved images.
template <int BMAX>
__device__ __forceinline__ index_t acc_of_element(const Args& a, index_t e)
{
    return acc_at(a, e / BMAX, static_cast<int>(e % BMAX));
}

/// The values c that pass P scatters for the block's local row l, one per
/// frame (frames past the batch get 0); writes r or q where the pass keeps them.
template <int BMAX, Pass P, class System>
__device__ __forceinline__ void row_values(const System& sys, const Args& a, const Shared& s,
                                           const Rows& rows, index_t l, const CgnrScalars* sc,
                                           float (&c)[BMAX])
{
    const index_t row = rows.first + l;
#pragma unroll
    for (int b = 0; b < BMAX; ++b) c[b] = 0.0f;
    if constexpr (P == Pass::normal) {
        // (frames past the batch have d = 0)
        block_row(sys, rows, l, [&](index_t col, float w) {
            float dv[BMAX];
            load_frames<BMAX>(s.d + col * BMAX, dv);
#pragma unroll
            for (int b = 0; b < BMAX; ++b) c[b] += w * dv[b];
        });
        if (a.cgls1) {
#pragma unroll
            for (int b = 0; b < BMAX; ++b) {
                if (b < a.batch) a.q[static_cast<size_type>(b) * a.m + row] = c[b];
            }
        }
    } else if constexpr (P == Pass::residual) {
        // Row sums in double, b subtracted before rounding (as the
        // residual primitive does).
        double sum[BMAX];
#pragma unroll
        for (int b = 0; b < BMAX; ++b) sum[b] = 0.0;
        block_row(sys, rows, l, [&](index_t col, float w) {
            float xv[BMAX];
            if (s.x != nullptr) {
                load_frames<BMAX>(s.x + col * BMAX, xv);
            } else {
                load_frames<BMAX, true>(a.xbuf + col * BMAX, xv);
            }
#pragma unroll
            for (int b = 0; b < BMAX; ++b) sum[b] += static_cast<double>(w) * xv[b];
        });
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (b >= a.batch) continue;
            const size_type k = static_cast<size_type>(b) * a.m + row;
            c[b] = static_cast<float>(sum[b] - a.b[k]);
            a.r[k] = c[b];
        }
    } else if constexpr (P == Pass::adjoint_b) {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (b < a.batch) c[b] = a.b[static_cast<size_type>(b) * a.m + row];
        }
    } else {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (b >= a.batch) continue;
            const size_type k = static_cast<size_type>(b) * a.m + row;
            float rk = a.r[k];
            if (sc[b].status == SolveStatus::running) {
                rk += static_cast<float>(sc[b].alpha) * a.q[k];
                a.r[k] = rk;
            }
            c[b] = rk;
        }
    }
}

/// The values c that the first sweep of pass P (residual, adjoint_b or
/// cgls1_r) found for local row l, read back from r (or b) for the scatter.
/// (The normal pass scatters in its one sweep and never comes here.)
template <int BMAX, Pass P>
__device__ __forceinline__ void stored_row_values(const Args& a, const Rows& rows, index_t l,
                                                  float (&c)[BMAX])
{
    const float* from = P == Pass::adjoint_b ? a.b : a.r;
#pragma unroll
    for (int b = 0; b < BMAX; ++b) {
        c[b] = b < a.batch ? from[static_cast<size_type>(b) * a.m + rows.first + l] : 0.0f;
    }
}

/// The power of two that maps the block's partial sums into fixed point:
/// |Σ c_i A_ij| ≤ max|c| · bound, kept below 2^30 so that the rounded terms
/// cannot overflow a 32-bit sum. 0 when max|c| is not finite: the combine
/// then passes NaN on, so the frame's guards see it.
__device__ __forceinline__ float fixed_point_scale(unsigned max_abs_bits, float bound)
{
    const float top = __uint_as_float(max_abs_bits) * bound;
    if (!(top < INFINITY)) return 0.0f;
    if (top == 0.0f) return 1.0f;
    return ldexpf(1.0f, min(29 - ilogbf(top), 126));
}

/// Per frame: the factor that turns the block's fixed-point image of this
/// pass back into floats (NaN for a frame whose c was not finite).
template <int BMAX>
__device__ __forceinline__ void fixed_point_unscale(const Shared& s, int pass,
                                                    float (&unscale)[BMAX])
{
#pragma unroll
    for (int b = 0; b < BMAX; ++b) {
        const float scale = s.pass_scale[(pass & 1) * BMAX + b];
        unscale[b] = scale == 0.0f ? __int_as_float(0x7fc00000) : 1.0f / scale;
    }
}

/// Thread 0 publishes the pass's scales for the combine, which reads them
/// after its barrier; the parity keeps the next pass from overwriting them
/// before every thread has read them.
template <int BMAX>
__device__ __forceinline__ void publish_scale(const Shared& s, int pass, const float (&scale)[BMAX])
{
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) s.pass_scale[(pass & 1) * BMAX + b] = scale[b];
    }
}

/// One row of the normal pass from block_row (staged or not, any width):
/// c = A_l d, then the scatter of c·A_l.
template <int BMAX, class System>
__device__ __forceinline__ void normal_row(const System& sys, const Args& a, const Shared& s,
                                           const Rows& rows, index_t l, const CgnrScalars* sc,
                                           const bool (&running)[BMAX],
                                           const float (&scale)[BMAX])
{
    int* acc = reinterpret_cast<int*>(s.acc);
    float c[BMAX];
    row_values<BMAX, Pass::normal>(sys, a, s, rows, l, sc, c);
    float cs[BMAX];
#pragma unroll
    for (int b = 0; b < BMAX; ++b) cs[b] = running[b] ? c[b] * scale[b] : 0.0f;
    block_row(sys, rows, l, [&](index_t col, float w) {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (!running[b]) continue;
            const int v = __float2int_rn(cs[b] * w);
            if (v != 0) atomicAdd(acc + acc_at(a, col, b), v);
        }
    });
}

/// The normal pass over the staged rows, of exactly W entries (padding has
/// weight 0): the row's columns and weights stay in registers from the
/// gather of d to the scatter.
template <int BMAX, int W>
__device__ void normal_pass_staged(const Args& a, const Shared& s, const Rows& rows,
                                   const bool (&running)[BMAX], const float (&scale)[BMAX])
{
    int* acc = reinterpret_cast<int*>(s.acc);
    for (index_t l = threadIdx.x; l < rows.staged; l += blockDim.x) {
        index_t col[W];
        float w[W];
#pragma unroll
        for (int j = 0; j < W; ++j) {
            col[j] = rows.col[j * rows.staged + l];
            w[j] = rows.val[j * rows.staged + l];
        }
        float c[BMAX];
#pragma unroll
        for (int b = 0; b < BMAX; ++b) c[b] = 0.0f;
#pragma unroll
        for (int j = 0; j < W; ++j) {
            float dv[BMAX];
            load_frames<BMAX>(s.d + col[j] * BMAX, dv);
#pragma unroll
            for (int b = 0; b < BMAX; ++b) c[b] += w[j] * dv[b];
        }
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (!running[b]) continue;
            const float cs = c[b] * scale[b];
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const int v = __float2int_rn(cs * w[j]);
                if (v != 0) atomicAdd(acc + acc_at(a, col[j], b), v);
            }
        }
        if (a.cgls1) {
#pragma unroll
            for (int b = 0; b < BMAX; ++b) {
                if (b < a.batch) a.q[static_cast<size_type>(b) * a.m + rows.first + l] = c[b];
            }
        }
    }
}

/// normal_pass_staged for the block's row width: 1 to 6 (prepare_rows
/// stages at least one entry a row; wider rows take the general loop).
template <int BMAX>
__device__ __forceinline__ void normal_pass_staged_any(const Args& a, const Shared& s,
                                                       const Rows& rows,
                                                       const bool (&running)[BMAX],
                                                       const float (&scale)[BMAX])
{
    switch (rows.width) {
    case 1: normal_pass_staged<BMAX, 1>(a, s, rows, running, scale); return;
    case 2: normal_pass_staged<BMAX, 2>(a, s, rows, running, scale); return;
    case 3: normal_pass_staged<BMAX, 3>(a, s, rows, running, scale); return;
    case 4: normal_pass_staged<BMAX, 4>(a, s, rows, running, scale); return;
    case 5: normal_pass_staged<BMAX, 5>(a, s, rows, running, scale); return;
    default: normal_pass_staged<BMAX, 6>(a, s, rows, running, scale); return;
    }
}

/// The normal pass, u = Aᵀ(A d), in one sweep over the rows: its scale comes
/// from |(A d)_i| ≤ row_bound · max|d| (max|d| is gathered where d is
/// written), so no barrier is needed between computing c and scattering it.
/// Staged rows of up to 6 entries (the paper matrices have 5 or 6) go
/// through a loop unrolled for their width; wider rows through the general
/// loop (unrolled paths for 7 and 8 raised the kernel's register spills
/// from ~60 to ~140 bytes).
template <int BMAX, class System>
__device__ void normal_pass_fixed_point(const System& sys, const Args& a, const Shared& s,
                                        const Rows& rows, const CgnrScalars* sc, int pass)
{
    // A stopped frame's d is not kept up to date: scatter nothing for it.
    const auto scales = [&](bool (&running)[BMAX], float (&scale)[BMAX]) {
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            running[b] = b < a.batch && sc[b].status == SolveStatus::running;
            const float c_max = rows.row_bound * __uint_as_float(s.d_max_bits[b]);
            scale[b] = running[b] ? fixed_point_scale(__float_as_uint(c_max), rows.bound) : 1.0f;
        }
    };
    {
        bool running[BMAX];
        float scale[BMAX];
        scales(running, scale);
        publish_scale<BMAX>(s, pass, scale);
        if (rows.staged == rows.count && rows.width <= 6) {
            normal_pass_staged_any<BMAX>(a, s, rows, running, scale);
            return;
        }
    }
    // Partly staged (or wider rows): the staged ones first, as above (in a
    // copy of their loop of its own: the one above keeps no registers for
    // the rows after it).
    index_t rest = 0;  // the rows from here on take normal_row
    if (rows.staged > 0 && rows.width <= 6) {
        bool running[BMAX];
        float scale[BMAX];
        scales(running, scale);
        normal_pass_staged_any<BMAX>(a, s, rows, running, scale);
        rest = rows.staged;
    }
    if (rest == rows.count) return;
    // (computed again rather than kept through the staged loop, which runs
    // short of registers)
    bool running[BMAX];
    float scale[BMAX];
    scales(running, scale);
    // Row `rest` goes to the thread that the staged loop would have given
    // it, so that the threads' row counts stay within one of each other.
    const index_t first = rest + (threadIdx.x + blockDim.x - rest % blockDim.x) % blockDim.x;
    for (index_t l = first; l < rows.count; l += blockDim.x) {
        normal_row<BMAX>(sys, a, s, rows, l, sc, running, scale);
    }
}

/// Folds this thread's |d| bits (of its frame) into the block's max|d| per
/// frame (read by the next normal pass).
template <int BMAX>
__device__ __forceinline__ void note_d_max(const Shared& s, unsigned bits)
{
    if constexpr (BMAX == 1) {
        bits = __reduce_max_sync(0xffffffffu, bits);
    } else {
        // over the lanes of the same frame
#pragma unroll
        for (int offset = 16; offset >= BMAX; offset /= 2) {
            bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
        }
    }
    if (threadIdx.x % 32 < BMAX && bits != 0) atomicMax(s.d_max_bits + thread_frame<BMAX>(), bits);
}

/// Scatters c = (pass P's row values) of the block's rows into the shared
/// image: acc[b][col] += c_b(row) · A(row, col).
template <int BMAX, Pass P, class System>
__device__ void row_pass(const System& sys, const Args& a, const Shared& s, const Rows& rows,
                         const CgnrScalars* sc, int pass)
{
    // Every pass clears the other parity's max|c|, which the previous pass
    // read before the last grid sync and the next pass writes after the
    // coming one; passes that find max|c| first rely on it being zero.
    if (threadIdx.x < BMAX) s.max_bits[((pass + 1) & 1) * BMAX + threadIdx.x] = 0;
    if (!rows.fixed_point) {
        // Float atomics (compare-and-swap loops): only when c of the
        // block's rows does not fit in shared memory.
        for (index_t l = threadIdx.x; l < rows.count; l += blockDim.x) {
            float c[BMAX];
            row_values<BMAX, P>(sys, a, s, rows, l, sc, c);
            const auto add = [&](index_t col, float w) {
#pragma unroll
                for (int b = 0; b < BMAX; ++b) {
                    if (b < a.batch) atomicAdd(s.acc + acc_at(a, col, b), c[b] * w);
                }
            };
            if (l < rows.staged) {
                block_row(sys, rows, l, add);
            } else {
                device_row_from(sys, rows.first + l, threadIdx.x % 32, add);
            }
        }
        return;
    }
    if constexpr (P == Pass::normal) {
        normal_pass_fixed_point<BMAX>(sys, a, s, rows, sc, pass);
        return;
    }
    // The first sweep: c of every row (left in r, or in b, for the second)
    // and the largest |c| per frame (as float bits, which order like the
    // values for non-negative floats; NaN sorts above Inf).
    unsigned* max_now = s.max_bits + (pass & 1) * BMAX;
    unsigned max_bits[BMAX];
#pragma unroll
    for (int b = 0; b < BMAX; ++b) max_bits[b] = 0;
    for (index_t l = threadIdx.x; l < rows.count; l += blockDim.x) {
        float c[BMAX];
        row_values<BMAX, P>(sys, a, s, rows, l, sc, c);
#pragma unroll
        for (int b = 0; b < BMAX; ++b) {
            if (b < a.batch) max_bits[b] = max(max_bits[b], __float_as_uint(fabsf(c[b])));
        }
    }
#pragma unroll
    for (int b = 0; b < BMAX; ++b) {
        const unsigned warp_max = __reduce_max_sync(0xffffffffu, max_bits[b]);
        if (threadIdx.x % 32 == 0 && warp_max != 0) atomicMax(max_now + b, warp_max);
    }
    __syncthreads();
    float scale[BMAX];
#pragma unroll
    for (int b = 0; b < BMAX; ++b) scale[b] = fixed_point_scale(max_now[b], rows.bound);
    publish_scale<BMAX>(s, pass, scale);
    int* acc = reinterpret_cast<int*>(s.acc);
    for (index_t l = threadIdx.x; l < rows.count; l += blockDim.x) {
        float cs[BMAX];
        stored_row_values<BMAX, P>(a, rows, l, cs);
#pragma unroll
        for (int b = 0; b < BMAX; ++b) cs[b] *= scale[b];
        block_row(sys, rows, l, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BMAX; ++b) {
                if (b >= a.batch) continue;
                const int v = __float2int_rn(cs[b] * w);
                if (v != 0) atomicAdd(acc + acc_at(a, col, b), v);
            }
        });
    }
}

/// Entry j (acc_at) of the block's scattered image as a float (`unscale`:
/// its frame's factor); leaves it zeroed.
__device__ __forceinline__ float take_image(const Shared& s, const Rows& rows, float unscale,
                                            int j)
{
    if (!rows.fixed_point) {
        const float v = s.acc[j];
        s.acc[j] = 0.0f;
        return v;
    }
    int* acc = reinterpret_cast<int*>(s.acc);
    const float v = static_cast<float>(acc[j]) * unscale;
    acc[j] = 0;
    return v;
}

/// Sets up the block's rows: its range, the longest row, the column sums of
/// |A_ij| (the fixed-point bound), and, when shared memory allows, a staged
/// copy of the rows. Expects s.acc zeroed; leaves it so.
template <class System>
__device__ Rows prepare_rows(const System& sys, const Args& a, const Shared& s,
                             unsigned* scratch, float* free_smem)
{
    Rows rows{};
    // Ranges start at multiples of 32 rows, so that a warp's 32 rows are
    // one slice of a sliced ELL matrix, whose entries are ordered to spread
    // each step over the shared-memory banks (recon::EntryOrder::spread_banks).
    const index_t per_block = ((a.m + gridDim.x - 1) / gridDim.x + 31) / 32 * 32;
    rows.first = min(a.m, static_cast<index_t>(blockIdx.x) * per_block);
    rows.count = min(a.m, rows.first + per_block) - rows.first;
    if (threadIdx.x < 3) scratch[threadIdx.x] = 0;
    __syncthreads();
    int longest = 0;
    float row_max = 0.0f;
    for (index_t l = threadIdx.x; l < rows.count; l += blockDim.x) {
        int length = 0;
        float row_sum = 0.0f;
        device_row(sys, rows.first + l, [&](index_t col, float w) {
            ++length;
            row_sum += fabsf(w);
            atomicAdd(s.acc + col, fabsf(w));
        });
        longest = max(longest, length);
        row_max = fmaxf(row_max, row_sum);
    }
    longest = static_cast<int>(__reduce_max_sync(0xffffffffu, static_cast<unsigned>(longest)));
    const unsigned row_bits = __reduce_max_sync(0xffffffffu, __float_as_uint(row_max));
    if (threadIdx.x % 32 == 0) {
        atomicMax(scratch, static_cast<unsigned>(longest));
        atomicMax(scratch + 2, row_bits);
    }
    __syncthreads();
    float column_max = 0.0f;
    for (index_t j = threadIdx.x; j < a.n; j += blockDim.x) {
        column_max = fmaxf(column_max, s.acc[j]);
        s.acc[j] = 0.0f;
    }
    const unsigned bits = __reduce_max_sync(0xffffffffu, __float_as_uint(column_max));
    if (threadIdx.x % 32 == 0) atomicMax(scratch + 1, bits);
    __syncthreads();
    // At least one entry a row: where every row of the block misses the
    // image (rays past its corners), each stages one entry of weight 0, so
    // that the loops unrolled for a width (normal_pass_staged_any) read
    // only what was staged.
    rows.width = max(static_cast<index_t>(1), static_cast<index_t>(scratch[0]));
    rows.bound = __uint_as_float(scratch[1]);
    // Rounding: the float sums above may sit an ulp below the exact ones.
    rows.row_bound = __uint_as_float(scratch[2]) * 1.001f;
    rows.fixed_point = a.rows_mode != rows_float_atomics ? 1 : 0;
    // Staged: every row where they fit, else whole slices of 32 (a warp's
    // rows all staged or all not).
    const std::size_t row_bytes = (sizeof(float) + sizeof(unsigned short)) * rows.width;
    const std::size_t fit = row_bytes == 0 ? rows.count : a.row_bytes / row_bytes;
    const bool may_stage = a.rows_mode == rows_automatic || a.rows_mode == rows_staged;
    rows.staged = !may_stage || a.n > 65536 ? 0
                  : fit >= static_cast<std::size_t>(rows.count)
                      ? rows.count
                      : static_cast<index_t>(fit / 32 * 32);
    rows.val = free_smem;
    rows.col = reinterpret_cast<unsigned short*>(rows.val +
                                                 static_cast<std::size_t>(rows.width) * rows.staged);
    for (index_t l = threadIdx.x; l < rows.staged; l += blockDim.x) {
        index_t j = 0;
        device_row(sys, rows.first + l, [&](index_t col, float w) {
            rows.val[j * rows.staged + l] = w;
            rows.col[j * rows.staged + l] = static_cast<unsigned short>(col);
            ++j;
        });
        // Padding: weight 0 in a column of its own row's choosing, so the
        // padding of many rows does not gather on one bank.
        for (; j < rows.width; ++j) {
            rows.val[j * rows.staged + l] = 0.0f;
            rows.col[j * rows.staged + l] = static_cast<unsigned short>(l % a.n);
        }
    }
    __syncthreads();
    return rows;
}

/// The two-phase form of gather_image: every block writes its image out;
/// after a grid sync each block sums a slice of the elements over all
/// blocks' images (in block order) into the slot; after a second sync every
/// block loads the whole slot.
template <int BMAX, int EPT>
__device__ void gather_image_two_phase(const Args& a, const Shared& s, const Rows& rows, int& pass,
                                       float (&out)[EPT])
{
    const int total = BMAX * a.n;
    __syncthreads();
    float unscale[BMAX];
    fixed_point_unscale<BMAX>(s, pass, unscale);
    // (the thread's elements are all of its frame)
    const float mine_unscale = of_frame<BMAX>(unscale, thread_frame<BMAX>());
    float* mine = a.partial + static_cast<size_type>(blockIdx.x) * total;
    for (int j = threadIdx.x; j < total; j += blockDim.x) {
        mine[j] = take_image(s, rows, mine_unscale, acc_of_element<BMAX>(a, j));
    }
    grid_barrier();
    float* slot = a.ubuf + static_cast<size_type>(pass % 3) * total;
    const int slice = (total + gridDim.x - 1) / gridDim.x;
    const int lo = blockIdx.x * slice;
    const int hi = min(total, lo + slice);
    // Threads split over (element, group of blocks); the groups' sums meet
    // in shared memory, then one thread per element adds them.
    const int width = hi > lo ? hi - lo : 1;
    const int groups = max(1, static_cast<int>(blockDim.x) / width);
    const int t = threadIdx.x;
    if (t < groups * width && lo + t % width < hi) {
        const int j = lo + t % width;
        float sum = 0.0f;
        for (int b = t / width; b < static_cast<int>(gridDim.x); b += groups) {
            sum += __ldcg(a.partial + static_cast<size_type>(b) * total + j);
        }
        s.sums[t] = sum;
    }
    __syncthreads();
    if (t < width && lo + t < hi) {
        float sum = 0.0f;
        for (int g = 0; g < groups; ++g) sum += s.sums[g * width + t];
        slot[lo + t] = sum;
    }
    grid_barrier();
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = threadIdx.x + j * block_threads;
        out[j] = e < total ? __ldcg(slot + e) : 0.0f;
    }
    ++pass;
}

/// Adds this block's image to the global slot (staggered: each block
/// starts at its own offset, so that the blocks' adds to one address are
/// spread over time instead of all arriving at once). Leaves it zeroed.
template <int BMAX>
__device__ void flush_block(const Args& a, const Shared& s, const Rows& rows, int pass,
                            float* slot)
{
    __syncthreads();
    const int total = BMAX * a.n;
    float unscale[BMAX];
    fixed_point_unscale<BMAX>(s, pass, unscale);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (total % 4 == 0) {
        // sm_90's vector atomics: one add of four floats (BMAX divides 4,
        // so entry j + q of a group is of frame q % BMAX). Measured on the
        // paper matrix: −0.5 µs per pass against scalar adds.
        static_assert(4 % BMAX == 0, "a group of four holds whole pixels");
        const int groups = total / 4;
        const int start = static_cast<int>((static_cast<long long>(blockIdx.x) * groups) / gridDim.x);
        for (int j0 = threadIdx.x; j0 < groups; j0 += blockDim.x) {
            const int j = 4 * (j0 + start < groups ? j0 + start : j0 + start - groups);
            const float4 v{take_image(s, rows, unscale[0], acc_of_element<BMAX>(a, j)),
                           take_image(s, rows, unscale[1 % BMAX], acc_of_element<BMAX>(a, j + 1)),
                           take_image(s, rows, unscale[2 % BMAX], acc_of_element<BMAX>(a, j + 2)),
                           take_image(s, rows, unscale[3 % BMAX], acc_of_element<BMAX>(a, j + 3))};
            if (v.x != 0.0f || v.y != 0.0f || v.z != 0.0f || v.w != 0.0f) {
                atomicAdd(reinterpret_cast<float4*>(slot + j), v);
            }
        }
        return;
    }
#endif
    const int start = static_cast<int>((static_cast<long long>(blockIdx.x) * total) / gridDim.x);
    for (int j0 = threadIdx.x; j0 < total; j0 += blockDim.x) {
        const int j = j0 + start < total ? j0 + start : j0 + start - total;
        const float v =
            take_image(s, rows, of_frame<BMAX>(unscale, j % BMAX), acc_of_element<BMAX>(a, j));
        if (v != 0.0f) atomicAdd(slot + j, v);
    }
}

/// Adds the blocks' images of `pass` into its global slot, waits for every
/// block, clears the slot two passes ahead (read by everyone a pass ago,
/// written again only after the next grid sync), and loads the sum into
/// `out` for the thread's elements. Leaves the shared image zeroed.
template <int BMAX, int EPT>
__device__ void gather_image(const Args& a, const Shared& s, const Rows& rows, int& pass,
                             float (&out)[EPT], PhaseClock* clock = nullptr)
{
    if (a.partial != nullptr) {
        gather_image_two_phase<BMAX>(a, s, rows, pass, out);
        return;
    }
    const int total = BMAX * a.n;
    float* slot = a.ubuf + static_cast<size_type>(pass % 3) * total;
    flush_block<BMAX>(a, s, rows, pass, slot);
    if (clock != nullptr) clock->mark(ph_flush);
    grid_barrier();
    if (clock != nullptr) clock->mark(ph_sync);
    float* ahead = a.ubuf + static_cast<size_type>((pass + 2) % 3) * total;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < total; j += gridDim.x * blockDim.x) {
        ahead[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = threadIdx.x + j * block_threads;
        out[j] = e < total ? __ldcg(slot + e) : 0.0f;
    }
    ++pass;
}

/// The smallest power of two ≥ n.
constexpr int power_of_two_at_least(int n)
{
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

/// The most partial sums per frame that one reduction takes (the
/// one-reduction step's f, gᵀd, hᵀu, uᵀu, hᵀh).
constexpr int max_sums_per_frame = 5;

/// What an update reports for its frame (published with the scalars).
enum StepFlags : int {
    step_taken = 1,  // α was applied: x and h move
    beta_known = 2,  // β (and the stop tests) done: d moves
};

/// The frames' CGNR scalars. reduce() sums each thread's partials (of its
/// frame) over the block in double (warp sums by halving exchanges, the
/// warps' sums through `red`, one barrier), then warp 0 alone finishes the
/// sums into `total` and its lane f updates frame f's state (α, β, guards
/// and stop tests: the CPU's code) and publishes what the element loops
/// need; after the second barrier every thread keeps those in registers.
/// One thread per frame does the double divisions; every thread doing them
/// measured slower (the FP64 pipe is shared by the SM's warps).
template <int BMAX>
struct BlockScalars {
    CgnrScalars* state;  // [BMAX], shared
    double* red;         // [warps][BMAX][max_sums_per_frame], shared
    double* total;       // [BMAX][max_sums_per_frame], shared
    float* published;    // [3][BMAX], shared: running (0/1), α, β
    int* published_flags;  // [BMAX], shared: the updates' StepFlags
    bool running[BMAX];
    float alpha[BMAX];
    float beta[BMAX];
    int flags[BMAX];

    __device__ const CgnrScalars* now() const { return state; }

    __device__ bool any_running() const
    {
        bool any = false;
#pragma unroll
        for (int f = 0; f < BMAX; ++f) any = any || running[f];
        return any;
    }

    /// Sums v (this thread's K values for its frame) over the block and
    /// applies `update(state, frame, totals)` to every frame of the batch;
    /// its return value (StepFlags) is published. Overwrites v.
    template <int K, class Update>
    __device__ void reduce(const Args& a, double (&v)[K], Update&& update,
                           PhaseClock* clock = nullptr)
    {
        static_assert(K <= max_sums_per_frame, "red holds max_sums_per_frame per frame");
        constexpr int N = K * BMAX;  // the block's sums, [frame][k]
        // In chunks of up to 8 values (16 registers), lest the thread spill.
        constexpr int C = power_of_two_at_least(N < 8 ? N : 8);
        constexpr int span = 32 / C;  // lanes that end with the same value
        const int lane = threadIdx.x % 32;
        const int warp = threadIdx.x / 32;
        if constexpr (BMAX == 1) {
#pragma unroll
            for (int c0 = 0; c0 < N; c0 += C) {
                double w[C];
#pragma unroll
                for (int k = 0; k < C; ++k) w[k] = c0 + k < N ? v[c0 + k] : 0.0;
                const double t = warp_sum_scatter<C>(w);
                if (lane % span == 0 && c0 + lane / span < N) red[warp * N + c0 + lane / span] = t;
            }
        } else {
            // Over the lanes of one frame (lane % BMAX); lane f < BMAX ends
            // with frame f's sums.
#pragma unroll
            for (int k = 0; k < K; ++k) {
                double t = v[k];
#pragma unroll
                for (int offset = 16; offset >= BMAX; offset /= 2) {
                    t += __shfl_xor_sync(0xffffffffu, t, offset);
                }
                if (lane < BMAX) red[warp * N + lane * K + k] = t;
            }
        }
        __syncthreads();
        if (clock != nullptr) clock->mark(ph_partials);
        if (warp == 0) {
            static_assert(warps == 32, "warp 0's lanes take one warp's sums each");
#pragma unroll
            for (int c0 = 0; c0 < N; c0 += C) {
                double w[C];
#pragma unroll
                for (int k = 0; k < C; ++k) w[k] = c0 + k < N ? red[lane * N + c0 + k] : 0.0;
                const double t = warp_sum_scatter<C>(w);
                if (lane % span == 0 && c0 + lane / span < N) total[c0 + lane / span] = t;
            }
            __syncwarp();
            // lane f updates frame f (side by side: the frames' divisions
            // and branches are independent)
            if (lane < BMAX && lane < a.batch) {
                const int f = lane;
                published_flags[f] = update(state[f], f, total + K * f);
                published[f] = state[f].status == SolveStatus::running ? 1.0f : 0.0f;
                published[BMAX + f] = static_cast<float>(state[f].alpha);
                published[2 * BMAX + f] = static_cast<float>(state[f].beta);
            }
        }
        __syncthreads();
#pragma unroll
        for (int f = 0; f < BMAX; ++f) {
            running[f] = f < a.batch && published[f] != 0.0f;
            alpha[f] = published[BMAX + f];
            beta[f] = published[2 * BMAX + f];
            flags[f] = f < a.batch ? published_flags[f] : 0;
        }
    }
};

/// Σ_t F_t(p, v) at pixel i of `frame`; `v` is an interleaved image (x or d).
template <int BMAX>
__device__ float regularizer_at(const Args& a, const float* state, const float* v, int frame,
                                index_t i)
{
    const Pixel px = a.grid.pixel(i);
    const BatchLayout layout = interleaved(BMAX, a.n);
    return terms_apply(a.terms, state, layout, frame, layout.of(v, frame), a.grid, px.ix, px.iy);
}

/// The state of every stateful term from the block's x.
template <int BMAX>
__device__ void prepare_state(const Args& a, const Shared& s)
{
    const int frame = thread_frame<BMAX>();
    if (frame >= a.batch) return;
    const BatchLayout layout = interleaved(BMAX, a.n);
    for (int e = threadIdx.x; e < BMAX * a.n; e += blockDim.x) {
        const Pixel px = a.grid.pixel(e / BMAX);
        terms_prepare(a.terms, s.state, layout, frame, layout.of(s.x, frame), a.grid, px.ix,
                      px.iy);
    }
}

/// The thread's j-th element: pixel i of the thread's frame (at
/// threadIdx.x + j·block_threads of the interleaved images).
struct Element {
    bool valid;  // a pixel of a frame of the batch
    index_t i;
};

template <int BMAX>
__device__ __forceinline__ Element element_of(const Args& a, int j)
{
    Element el{};
    el.i = (static_cast<int>(threadIdx.x) + j * block_threads) / BMAX;
    if constexpr (BMAX == 1) {
        el.valid = el.i < a.n;
    } else {
        // Valid for j below the thread's count of elements: one compare per
        // j against one value per thread (for 4 frames, the per-j
        // conditions were hoisted out of the main loop into spilled
        // registers).
        const int count = thread_frame<BMAX>() < a.batch
                              ? (BMAX * a.n - static_cast<int>(threadIdx.x) + block_threads - 1) /
                                    block_threads
                              : 0;
        el.valid = j < count;
    }
    return el;
}

/// Without a regularizer nothing but the residual pass reads x, so x leaves
/// shared memory to the staged rows: each block owns a slice of the
/// interleaved x, one element per thread, kept in a register and moved by
/// the steps; before a residual pass the owners write it to a.xbuf, and a
/// grid sync later every block gathers from there.
struct OwnedX {
    int e;       // the element, −1 for none
    bool valid;  // of a frame of the batch (the others stay 0)
    int frame;
    index_t i;
    float x;

    /// x += α d for this block's element, where its frame took the step.
    template <int BMAX>
    __device__ __forceinline__ void step(const bool (&moves)[BMAX], const float (&alpha)[BMAX],
                                         float d)
    {
        if (valid && of_frame<BMAX>(moves, frame)) x += of_frame<BMAX>(alpha, frame) * d;
    }
    /// For the next residual pass (a grid sync must follow).
    __device__ __forceinline__ void publish(const Args& a) const
    {
        if (e >= 0) a.xbuf[e] = x;
    }
};

/// This thread's element of x0 (x_shared == 0 only). One frame keeps x in
/// shared memory, where its rows fit beside it: the register measured
/// slower (paper_large +0.5 ms, H100).
template <int BMAX>
__device__ OwnedX own_x(const Args& a)
{
    OwnedX o{-1, false, 0, 0, 0.0f};
    if constexpr (BMAX == 1) return o;
    const int total = BMAX * a.n;
    const int per_block = (total + gridDim.x - 1) / gridDim.x;  // ≤ blockDim.x: see x_shared
    const int e = blockIdx.x * per_block + threadIdx.x;
    if (a.x_shared || threadIdx.x >= per_block || e >= total) return o;
    o.e = e;
    o.frame = e % BMAX;
    o.i = e / BMAX;
    o.valid = o.frame < a.batch;
    if (o.valid) o.x = a.x[static_cast<size_type>(o.frame) * a.n + o.i];
    return o;
}

/// d = −g + β d at element e; folds |d| into the thread's bits.
__device__ __forceinline__ void move_direction(const Shared& s, float beta, int e, float g,
                                               unsigned& bits)
{
    const float dj = -g + beta * s.d[e];
    s.d[e] = dj;
    bits = max(bits, __float_as_uint(fabsf(dj)));
}

/// d_{k+1} = −g_{k+1} + β_k d_k for the frames still running, and their
/// max|d| (for the next normal pass's scale).
template <int BMAX, int EPT>
__device__ void direction_step(const Args& a, const Shared& s, const BlockScalars<BMAX>& sc,
                               const float (&g)[EPT])
{
    const int frame = thread_frame<BMAX>();
    unsigned d_bits = 0;
    if (of_frame<BMAX>(sc.running, frame)) {
        const float beta = of_frame<BMAX>(sc.beta, frame);
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            if (!element_of<BMAX>(a, j).valid) continue;
            move_direction(s, beta, threadIdx.x + j * block_threads, g[j], d_bits);
        }
    }
    note_d_max<BMAX>(s, d_bits);
}

/// The image-space part of an iteration with one block reduction instead of
/// two, for the fused form without a regularizer when no residual
/// replacement follows (g = h, e = u): f = dᵀu, gᵀd, hᵀu, uᵀu and hᵀh in
/// one pass give α and, expanded (cgnr_scalars_end_expanded), β; then x, h
/// and d move in one loop. A frame whose expansion cancels gets β summed
/// over its new h, as in the general step (rare: the gradient must shrink
/// ~30x in one iteration). Saves a reduction's two barriers, warp 0's
/// second stage and an element loop per iteration.
template <int BMAX, int EPT>
__device__ void one_reduction_step(const Args& a, const Shared& s, bool x_shared,
                                   BlockScalars<BMAX>& sc, OwnedX& x_own, float (&h)[EPT],
                                   float (&g)[EPT], const float (&u)[EPT], PhaseClock& clock)
{
    constexpr int K = max_sums_per_frame;
    const int frame = thread_frame<BMAX>();
    // d_k of the owned x element, before the loop below moves d
    const float d_own = x_own.e >= 0 ? s.d[x_own.e] : 0.0f;
    double v[K] = {};
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        if (!element_of<BMAX>(a, j).valid) continue;
        const double dj = s.d[threadIdx.x + j * block_threads];
        const double uj = u[j];
        const double hj = h[j];
        v[0] += dj * uj;
        v[1] += hj * dj;
        v[2] += hj * uj;
        v[3] += uj * uj;
        v[4] += hj * hj;
    }
    sc.template reduce<K>(a, v, [&](CgnrScalars& state, int, const double* t) {
        if (state.status != SolveStatus::running) return 0;
        state.f = t[0];
        state.gd = t[1];
        if (!cgnr_scalars_alpha(state)) return 0;
        const double step = static_cast<float>(state.alpha);  // the α the elements take
        const bool known = cgnr_scalars_end_expanded(state, a.params, step, t[2], t[3], t[4]);
        return step_taken | (known ? beta_known : 0);
    }, &clock);
    clock.mark(ph_alpha);
    bool all_known = true;
#pragma unroll
    for (int f = 0; f < BMAX; ++f) {
        if ((sc.flags[f] & step_taken) != 0 && (sc.flags[f] & beta_known) == 0) all_known = false;
    }
    // x_{k+1} = x_k + α_k d_k;  h_{k+1} = h_k + α_k u_k;  with β known,
    // d_{k+1} = −h_{k+1} + β_k d_k
    bool stepped[BMAX];
#pragma unroll
    for (int f = 0; f < BMAX; ++f) stepped[f] = (sc.flags[f] & step_taken) != 0;
    x_own.step<BMAX>(stepped, sc.alpha, d_own);
    const bool step = of_frame<BMAX>(stepped, frame);
    const bool moves = all_known && of_frame<BMAX>(sc.running, frame);
    const float alpha = of_frame<BMAX>(sc.alpha, frame);
    const float beta = of_frame<BMAX>(sc.beta, frame);
    unsigned d_bits = 0;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        if (!element_of<BMAX>(a, j).valid) continue;
        const int e = threadIdx.x + j * block_threads;
        if (step) {
            if (x_shared) s.x[e] += alpha * s.d[e];
            h[j] += alpha * u[j];
        }
        g[j] = h[j];
        if (moves) move_direction(s, beta, e, g[j], d_bits);
    }
    clock.mark(ph_step);
    if (all_known) {
        note_d_max<BMAX>(s, d_bits);
        return;
    }
    // The expansion cancelled for some frame: β from the new vectors.
    double ge_gg[2] = {};
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        if (!element_of<BMAX>(a, j).valid) continue;
        const double gj = g[j];
        ge_gg[0] += gj * u[j];
        ge_gg[1] += gj * gj;
    }
    sc.template reduce<2>(a, ge_gg, [&](CgnrScalars& state, int f, const double* t) {
        const int flags = of_frame<BMAX>(sc.flags, f);
        if (state.status != SolveStatus::running || (flags & beta_known) != 0) return flags;
        cgnr_scalars_end(state, a.params, t[0], t[1]);
        return flags | beta_known;
    }, &clock);
    clock.mark(ph_beta);
    direction_step<BMAX>(a, s, sc, g);
}

/// Prints block 0's cycles per iteration in each phase, and the most any
/// block spent there. Every block calls it (it syncs the grid).
__device__ void report_phases(const PhaseClock& clock, int batch, int iterations)
{
    if (clock.on) {
        for (int p = 0; p < ph_count; ++p) {
            atomicMax(phase_max_cycles + p, static_cast<unsigned long long>(clock.cycles[p]));
        }
    }
    grid_barrier();
    if (!clock.on || blockIdx.x != 0 || iterations == 0) return;
    const double per = 1.0 / iterations;
    const auto block0 = [&](Phase p) { return per * clock.cycles[p]; };
    const auto most = [&](Phase p) { return per * static_cast<double>(phase_max_cycles[p]); };
    printf("persistent kernel, batch %d, cycles per iteration over %d (block 0 / most of any block): "
           "rows %.0f/%.0f flush %.0f/%.0f sync %.0f/%.0f load %.0f/%.0f partials %.0f/%.0f "
           "alpha %.0f/%.0f step %.0f/%.0f beta %.0f/%.0f direction %.0f/%.0f\n",
           batch, iterations, block0(ph_rows), most(ph_rows), block0(ph_flush), most(ph_flush),
           block0(ph_sync), most(ph_sync), block0(ph_load), most(ph_load), block0(ph_partials),
           most(ph_partials), block0(ph_alpha),
           most(ph_alpha), block0(ph_step), most(ph_step), block0(ph_beta), most(ph_beta),
           block0(ph_direction), most(ph_direction));
}

/// Regularized: compiled apart, so that without a regularizer g is h (12
/// registers fewer for 4 frames) and no stencil code competes for registers.
template <int BMAX, int EPT, bool Regularized, class System>
__global__ void __launch_bounds__(block_threads, 1) persistent_cgnr_kernel(System sys, Args a)
{
    extern __shared__ float smem[];
    __shared__ CgnrScalars scalar_state[BMAX];
    // The block reduction's warp sums and the two-phase combine's partial
    // sums share one buffer (never in use at once: barriers lie between).
    constexpr int red_doubles = warps * max_sums_per_frame * BMAX;
    __shared__ double red[red_doubles > block_threads / 2 ? red_doubles : block_threads / 2];
    __shared__ double scalar_total[max_sums_per_frame * BMAX];
    __shared__ float scalar_published[3 * BMAX];
    __shared__ int scalar_flags[BMAX];

    __shared__ unsigned max_bits[2 * BMAX];
    __shared__ unsigned scratch[3];
    __shared__ float pass_scale[2 * BMAX];
    __shared__ unsigned d_max_bits[BMAX];
    __shared__ long long phase_cycles[ph_count + 1];
    PhaseClock clock{phase_cycles, phase_cycles + ph_count, a.phases != 0 && threadIdx.x == 0};
    if (clock.on) {
        for (int p = 0; p <= ph_count; ++p) phase_cycles[p] = 0;
        if (blockIdx.x == 0) {
            for (int p = 0; p < ph_count; ++p) phase_max_cycles[p] = 0;
        }
    }
    const int total = BMAX * a.n;
    // d, acc, then x (with a regularizer) and the regularizer's state
    // (known at compile time where it matters: one frame, a regularizer)
    const bool x_shared = BMAX == 1 || Regularized || a.x_shared != 0;
    float* const x_smem = x_shared ? smem + 2 * total : nullptr;
    float* const state = smem + (x_shared ? 3 : 2) * total;
    const Shared s{smem,  smem + total, x_smem,    state, reinterpret_cast<float*>(red),
                   max_bits, pass_scale, d_max_bits};
    constexpr bool regularized = Regularized;
    const int frame = thread_frame<BMAX>();
    OwnedX x_own = own_x<BMAX>(a);
    x_own.publish(a);  // for the first residual pass, after the grid sync below

    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 3 * total;
         j += gridDim.x * blockDim.x) {
        a.ubuf[j] = 0.0f;
    }
    // x into the interleaved layout; the slots of frames past the batch stay 0
    for (int j = threadIdx.x; j < total; j += blockDim.x) {
        if (x_shared) {
            const index_t i = j / BMAX;
            s.x[j] = frame < a.batch ? a.x[static_cast<size_type>(frame) * a.n + i] : 0.0f;
        }
        s.d[j] = 0.0f;
        s.acc[j] = 0.0f;
    }
    if (threadIdx.x < 2 * BMAX) max_bits[threadIdx.x] = 0;
    if (threadIdx.x < BMAX) d_max_bits[threadIdx.x] = 0;
    __syncthreads();
    const Rows rows = prepare_rows(sys, a, s, scratch, state + a.stateful * total);
    grid_barrier();

    int pass = 0;
    float h[EPT], u[EPT], g_own[EPT];
    float(&g)[EPT] = Regularized ? g_own : h;  // g = h + F(x): g is h without F
    BlockScalars<BMAX> sc{scalar_state, red, scalar_total, scalar_published, scalar_flags};
    for (int f = 0; f < BMAX; ++f) {
        if (threadIdx.x == 0 && f < a.batch) scalar_state[f] = a.scalars[f];
    }
    // (the grid syncs in the passes below order that write before its reads)

    // r0 = A x0 − b;  h0 = Aᵀ r0;  Aᵀ b (into u) for the stop test's reference
    row_pass<BMAX, Pass::residual>(sys, a, s, rows, sc.now(), pass);
    gather_image<BMAX>(a, s, rows, pass, h);
    row_pass<BMAX, Pass::adjoint_b>(sys, a, s, rows, sc.now(), pass);
    gather_image<BMAX>(a, s, rows, pass, u);
    // g0 = h0 + F(x0, x0);  d0 = −g0;  ‖g0‖²
    if (regularized) {
        prepare_state<BMAX>(a, s);
        __syncthreads();
    }
    // Products and sums in double: float partials measured no faster here,
    // and squares of small gradients leave float's range.
    double v[2] = {};
    unsigned d_bits = 0;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const Element el = element_of<BMAX>(a, j);
        g[j] = h[j];
        if (!el.valid) continue;
        if (regularized) g[j] += regularizer_at<BMAX>(a, s.state, s.x, frame, el.i);
        s.d[threadIdx.x + j * block_threads] = -g[j];
        d_bits = max(d_bits, __float_as_uint(fabsf(g[j])));
        v[0] += static_cast<double>(g[j]) * g[j];
        v[1] += static_cast<double>(u[j]) * u[j];
    }
    note_d_max<BMAX>(s, d_bits);
    sc.template reduce<2>(a, v, [&](CgnrScalars& state, int, const double* t) {
        cgnr_scalars_begin(state, a.params, t[0], t[1]);
        return 0;
    });  // (its barriers also complete d0 and max|d|)

    clock.start();
    int iterations = 0;
    for (int k = 0; sc.any_running(); ++k) {
        ++iterations;
        // u_k = Aᵀ(A d_k)   (CGLS1: q_k = A d_k kept)
        row_pass<BMAX, Pass::normal>(sys, a, s, rows, sc.now(), pass);
        clock.mark(ph_rows);
        gather_image<BMAX>(a, s, rows, pass, u, &clock);
        clock.mark(ph_load);
        // Every thread read max|d| in the normal pass (the gather's barrier
        // lies between); the d update below gathers it anew.
        if (threadIdx.x < BMAX) s.d_max_bits[threadIdx.x] = 0;
        const bool replace = a.replacement > 0 && (k + 1) % a.replacement == 0;
        if (a.one_reduction != 0 && !regularized && !a.cgls1 && !replace) {
            one_reduction_step<BMAX>(a, s, x_shared, sc, x_own, h, g, u, clock);
            __syncthreads();
            clock.mark(ph_direction);
            continue;
        }
        // e_k = u_k + F(x_k, d_k) (into the idle scatter image);
        // f_k = d_kᵀ e_k;  g_kᵀ d_k
        v[0] = 0.0;
        v[1] = 0.0;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of<BMAX>(a, j);
            if (!el.valid) continue;
            const int e = threadIdx.x + j * block_threads;
            float ej = u[j];
            if (regularized) ej += regularizer_at<BMAX>(a, s.state, s.d, frame, el.i);
            s.acc[e] = ej;
            const double dj = s.d[e];
            v[0] += dj * ej;
            v[1] += static_cast<double>(g[j]) * dj;
        }
        // α_k = −(g_kᵀ d_k) / f_k, guarded
        sc.template reduce<2>(a, v, [&](CgnrScalars& state, int, const double* t) {
            if (state.status != SolveStatus::running) return 0;
            state.f = t[0];
            state.gd = t[1];
            cgnr_scalars_alpha(state);
            return 0;
        }, &clock);
        clock.mark(ph_alpha);
        // x_{k+1} = x_k + α_k d_k;  fused: h_{k+1} = h_k + α_k u_k
        if (x_own.e >= 0) x_own.step<BMAX>(sc.running, sc.alpha, s.d[x_own.e]);
        if (of_frame<BMAX>(sc.running, frame)) {
            const float alpha = of_frame<BMAX>(sc.alpha, frame);
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                if (!element_of<BMAX>(a, j).valid) continue;
                const int e = threadIdx.x + j * block_threads;
                if (x_shared) s.x[e] += alpha * s.d[e];
                if (!a.cgls1) h[j] += alpha * u[j];
            }
        }
        if (a.cgls1 || replace) {
            // CGLS1: r_{k+1} = r_k + α_k q_k;  h_{k+1} = Aᵀ r_{k+1}.
            // Residual replacement: h_{k+1} = Aᵀ(A x_{k+1} − b).
            // The pass scatters into the shared image, so e moves to u's
            // registers meanwhile.
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                const int e = threadIdx.x + j * block_threads;
                u[j] = e < total ? s.acc[e] : 0.0f;
            }
            __syncthreads();
            for (int j = threadIdx.x; j < total; j += blockDim.x) s.acc[j] = 0.0f;
            __syncthreads();
            if (a.cgls1) {
                row_pass<BMAX, Pass::cgls1_r>(sys, a, s, rows, sc.now(), pass);
            } else {
                if (s.x == nullptr) {
                    x_own.publish(a);
                    grid_barrier();
                }
                row_pass<BMAX, Pass::residual>(sys, a, s, rows, sc.now(), pass);
            }
            gather_image<BMAX>(a, s, rows, pass, h);
        } else {
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                const int e = threadIdx.x + j * block_threads;
                u[j] = e < total ? s.acc[e] : 0.0f;
                if (e < total) s.acc[e] = 0.0f;
            }
        }
        if (regularized) __syncthreads();  // x_{k+1} complete for the stencils
        clock.mark(ph_step);
        // g_{k+1} = h_{k+1} + F(x_k, x_{k+1});  g_{k+1}ᵀ e_k;  ‖g_{k+1}‖²   (u holds e_k)
        v[0] = 0.0;
        v[1] = 0.0;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of<BMAX>(a, j);
            g[j] = h[j];
            if (!el.valid) continue;
            if (regularized) g[j] += regularizer_at<BMAX>(a, s.state, s.x, frame, el.i);
            const double gj = g[j];
            v[0] += gj * u[j];
            v[1] += gj * gj;
        }
        // β_k and the stop tests
        sc.template reduce<2>(a, v, [&](CgnrScalars& state, int, const double* t) {
            if (state.status != SolveStatus::running) return 0;
            cgnr_scalars_end(state, a.params, t[0], t[1]);
            return 0;
        }, &clock);
        clock.mark(ph_beta);
        direction_step<BMAX>(a, s, sc, g);
        // the lag moves on: state from x_{k+1}
        if (regularized) prepare_state<BMAX>(a, s);
        __syncthreads();
        clock.mark(ph_direction);
    }

    if (a.phases != 0) report_phases(clock, a.batch, iterations);
    if (x_own.valid) a.x[static_cast<size_type>(x_own.frame) * a.n + x_own.i] = x_own.x;
    if (blockIdx.x != 0) return;
    // back to the solver's frame-major buffers
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const Element el = element_of<BMAX>(a, j);
        if (!el.valid) continue;
        const size_type k = static_cast<size_type>(frame) * a.n + el.i;
        a.h[k] = h[j];
        a.g[k] = g[j];
    }
    if (frame < a.batch) {
        for (int j = threadIdx.x; j < total; j += blockDim.x) {
            const size_type k = static_cast<size_type>(frame) * a.n + j / BMAX;
            if (x_shared) a.x[k] = s.x[j];
            a.d[k] = s.d[j];
        }
    }
    if (threadIdx.x < a.batch) a.scalars[threadIdx.x] = sc.now()[threadIdx.x];
}

// --- host side ---------------------------------------------------------------------

/// (frames per block, elements per thread) shapes that are compiled. A
/// shape's images hold bmax frames whatever the batch: bmax·n ≤ ept·1024.
struct Shape {
    int bmax;
    int ept;
};
constexpr Shape shapes[] = {{1, 4}, {1, 12}, {4, 12}};

int stateful_terms(const RegularizerTerms& terms)
{
    int count = 0;
    for (int t = 0; t < terms.count; ++t) count += needs_state(terms.term[t].kind) ? 1 : 0;
    return count;
}

const Shape* shape_for(const PersistentCgnrProblem& p)
{
    for (const Shape& s : shapes) {
        const long long total = static_cast<long long>(s.bmax) * cols_of(p.system);
        if (p.batch <= s.bmax && total <= static_cast<long long>(s.ept) * block_threads) return &s;
    }
    return nullptr;
}

/// Floats of one image set of the batch (bmax frames interleaved).
std::size_t image_floats(const PersistentCgnrProblem& p)
{
    const Shape* shape = shape_for(p);
    return static_cast<std::size_t>(shape != nullptr ? shape->bmax : p.batch) * cols_of(p.system);
}

/// Whether x stays in shared memory: with a regularizer (its stencils read
/// x), for one frame (own_x), or where the blocks are too few to own x one
/// element per thread (OwnedX).
bool x_in_shared(const Executor& exec, const PersistentCgnrProblem& p)
{
    const std::size_t blocks = static_cast<std::size_t>(sm_count(exec));
    const Shape* shape = shape_for(p);
    return p.terms.count > 0 || shape == nullptr || shape->bmax == 1 ||
           (image_floats(p) + blocks - 1) / blocks > block_threads;
}

std::size_t shared_bytes(const Executor& exec, const PersistentCgnrProblem& p)
{
    const std::size_t images = 2 + (x_in_shared(exec, p) ? 1 : 0) + stateful_terms(p.terms);
    return images * image_floats(p) * sizeof(float);
}

/// Launches with all the shared memory a block may have: what the images
/// leave over holds the block's rows where they fit.
template <int BMAX, int EPT, bool Regularized, class System>
void launch_shape(const Executor& exec, const System& sys, Args args, std::size_t image_bytes)
{
    auto kernel = persistent_cgnr_kernel<BMAX, EPT, Regularized, System>;
    const int limit = device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin);
    cudaFuncAttributes attributes{};
    RECON_CUDA_TRY(cudaFuncGetAttributes(&attributes, kernel));
    const std::size_t bytes = static_cast<std::size_t>(limit) - attributes.sharedSizeBytes;
    if (bytes < image_bytes) {
        throw std::runtime_error{"persistent CGNR kernel: " + std::to_string(image_bytes) +
                                 " bytes of images do not fit the " + std::to_string(bytes) +
                                 " bytes of shared memory a block may have"};
    }
    args.row_bytes = static_cast<unsigned>(bytes - image_bytes);
    RECON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    int per_sm = 0;
    RECON_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_threads,
                                                                 bytes));
    if (per_sm < 1) {
        throw std::runtime_error{"persistent CGNR kernel: no block fits on an SM (" +
                                 std::to_string(bytes) + " bytes of shared memory)"};
    }
    void* params[] = {const_cast<System*>(&sys), &args};
    RECON_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel),
                                               dim3(sm_count(exec)), dim3(block_threads), params,
                                               bytes, stream_of(exec)));
}

RowsMode rows_mode_from_environment()
{
    const char* value = std::getenv("RECON_PERSISTENT_ROWS");
    if (value == nullptr || std::string{value}.empty() || std::string{value} == "auto") {
        return rows_automatic;
    }
    if (std::string{value} == "staged") return rows_staged;
    if (std::string{value} == "system") return rows_from_system;
    if (std::string{value} == "float") return rows_float_atomics;
    throw std::invalid_argument{"RECON_PERSISTENT_ROWS: expected auto, staged, system or float, "
                                "found '" +
                                std::string{value} + "'"};
}

}  // namespace

std::size_t persistent_workspace_floats(const PersistentCgnrProblem& p)
{
    if (p.normal_matrix.data != nullptr) return normal_matrix_workspace_floats(p);
    // Three slots, x for the residual passes, and the blocks' images for
    // the two-phase reduction (one block per SM; 256 covers every current
    // GPU, checked at launch).
    return (4 + (p.two_phase_reduction ? max_persistent_blocks : 0)) * image_floats(p);
}

void launch_persistent_cgnr(const Executor& exec, const PersistentCgnrProblem& p,
                            float* workspace)
{
    const std::string why = persistent_cgnr_supports(exec, p);
    if (!why.empty()) throw std::invalid_argument{why};
    if (p.normal_matrix.data != nullptr) {
        launch_normal_matrix_cgnr(exec, p, workspace);
        return;
    }
    Args args{p.terms,
              p.grid,
              p.params,
              p.cgls1 ? 1 : 0,
              p.residual_replacement,
              p.batch,
              stateful_terms(p.terms),
              rows_of(p.system),
              cols_of(p.system),
              p.b.data,
              p.x.data,
              p.r.data,
              p.q.data,
              p.h.data,
              p.g.data,
              p.d.data,
              p.scalars.data,
              workspace,
              workspace + 3 * image_floats(p),
              nullptr,
              0,
              rows_mode_from_environment(),
              std::getenv("RECON_PERSISTENT_PHASES") != nullptr ? 1 : 0,
              std::getenv("RECON_PERSISTENT_TWO_REDUCTIONS") != nullptr ? 0 : 1,
              x_in_shared(exec, p) ? 1 : 0};
    if (p.two_phase_reduction) {
        if (sm_count(exec) > max_persistent_blocks) {
            throw std::runtime_error{"persistent CGNR kernel: more SMs than workspace blocks"};
        }
        args.partial = workspace + 4 * image_floats(p);
    }
    const Shape* shape = shape_for(p);
    const std::size_t bytes = shared_bytes(exec, p);
    std::visit(
        [&](const auto& sys) {
            const auto with = [&](auto regularized) {
                constexpr bool reg = decltype(regularized)::value;
                if (shape->bmax == 1 && shape->ept == 4) {
                    launch_shape<1, 4, reg>(exec, sys, args, bytes);
                } else if (shape->bmax == 1) {
                    launch_shape<1, 12, reg>(exec, sys, args, bytes);
                } else {
                    launch_shape<4, 12, reg>(exec, sys, args, bytes);
                }
            };
            if (p.terms.count > 0) {
                with(std::true_type{});
            } else {
                with(std::false_type{});
            }
        },
        p.system);
}

}  // namespace recon::kernels::cuda

namespace recon::kernels {

std::vector<PersistentCgnrProblem> persistent_chunks(const PersistentCgnrProblem& p)
{
    if (p.batch <= persistent_max_frames) return {p};
    const auto m = static_cast<size_type>(rows_of(p.system));
    const auto n = static_cast<size_type>(cols_of(p.system));
    std::vector<PersistentCgnrProblem> chunks;
    for (int first = 0; first < p.batch; first += persistent_max_frames) {
        PersistentCgnrProblem c = p;
        c.batch = std::min(persistent_max_frames, p.batch - first);
        // Frames [first, first + c.batch) of a [batch][size] buffer (empty stays empty).
        const auto part = [&](auto view, size_type size) {
            if (view.data == nullptr) return view;
            return decltype(view){view.data + static_cast<size_type>(first) * size,
                                  static_cast<size_type>(c.batch) * size};
        };
        c.b = part(p.b, m);
        c.x = part(p.x, n);
        c.r = part(p.r, m);
        c.q = part(p.q, m);
        c.h = part(p.h, n);
        c.g = part(p.g, n);
        c.d = part(p.d, n);
        c.scalars = part(p.scalars, 1);
        chunks.push_back(c);
    }
    return chunks;
}

bool persistent_normal_matrix_applies(const Executor& exec, const PersistentCgnrProblem& p)
{
    using namespace cuda;
    return !exec.is_cpu() && rows_mode_from_environment() == rows_automatic &&
           normal_matrix_cgnr_supports(exec, p).empty();
}

std::string persistent_cgnr_supports(const Executor& exec, const PersistentCgnrProblem& p)
{
    using namespace cuda;
    if (exec.is_cpu()) return "the persistent kernel needs a CUDA executor";
    if (p.batch < 1) return "batch must be positive";
    if (p.normal_matrix.data != nullptr) return normal_matrix_cgnr_supports(exec, p);
    if (p.cgls1 && p.q.data == nullptr) return "the CGLS1 form needs the q buffer";
    if (p.batch > persistent_max_frames) {
        for (const PersistentCgnrProblem& chunk : persistent_chunks(p)) {
            std::string why = persistent_cgnr_supports(exec, chunk);
            if (!why.empty()) return why;
        }
        return {};
    }
    if (shape_for(p) == nullptr) {
        return "the persistent kernel keeps the images of up to 4 frames in one block: batch 1 "
               "with n <= 12288, or 2 to 4 frames (larger batches: 4 at a time) with "
               "n <= 3072; found batch " +
               std::to_string(p.batch) + ", n " + std::to_string(cols_of(p.system));
    }
    const int limit = device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin);
    const std::size_t static_bytes = 8 * 1024;  // scalars and reduction buffers
    if (shared_bytes(exec, p) + static_bytes > static_cast<std::size_t>(limit)) {
        return "the persistent kernel needs " + std::to_string(shared_bytes(exec, p)) +
               " bytes of shared memory per block for this batch and regularizer, the device "
               "allows " +
               std::to_string(limit);
    }
    return {};
}

}  // namespace recon::kernels
