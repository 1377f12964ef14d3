// The persistent cooperative CGNR kernel (see kernels/persistent.hpp for the
// scheme). One block of 1024 threads per SM. Per block, in shared memory:
// d, x, the scatter image (reused for e between passes) and the regularizer
// state; in registers: h, g and u for the thread's elements of the batch.
// All blocks compute the image-space part identically (same data, same
// order of operations), so they agree on every scalar without exchanging
// more than the scattered image.

#include <cooperative_groups.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "kernels/backends.hpp"
#include "kernels/cgnr_scalars.hpp"
#include "kernels/stencils.hpp"
#include "persistent.cuh"
#include "system_kernels.cuh"

namespace recon::kernels::cuda {
namespace {

namespace cg = cooperative_groups;

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
    float* ubuf;     // 3 slots of batch * n floats
    float* partial;  // two-phase reduction: [block][batch * n]; else null
};

enum class Pass {
    normal,    // c = A d (q = c for CGLS1), scatter c: u = Aᵀ A d
    residual,  // c = A x − b (r = c), scatter c: h = Aᵀ r
    cgls1_r,   // r += α q (running frames), scatter r: h = Aᵀ r
    adjoint_b, // scatter b: Aᵀ b, the reference of the relative stop test
};

struct Shared {
    float* d;      // [batch][n]
    float* x;      // [batch][n]
    float* acc;    // [batch][n] scatter image between passes, e within an iteration
    float* state;  // [stateful][batch][n]
    float* sums;   // [block_threads] partial sums of the two-phase reduction
};

template <int BMAX, Pass P, class System>
__device__ void row_pass(const System& sys, const Args& a, const Shared& s,
                         const CgnrScalars* sc)
{
    const index_t stride = gridDim.x * blockDim.x;
    for (index_t row = blockIdx.x * blockDim.x + threadIdx.x; row < a.m; row += stride) {
        float c[BMAX];
#pragma unroll
        for (int b = 0; b < BMAX; ++b) c[b] = 0.0f;
        if constexpr (P == Pass::normal) {
            device_row(sys, row, [&](index_t col, float w) {
#pragma unroll
                for (int b = 0; b < BMAX; ++b) {
                    if (b < a.batch) c[b] += w * s.d[b * a.n + col];
                }
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
            device_row(sys, row, [&](index_t col, float w) {
#pragma unroll
                for (int b = 0; b < BMAX; ++b) {
                    if (b < a.batch) sum[b] += static_cast<double>(w) * s.x[b * a.n + col];
                }
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
        device_row_from(sys, row, threadIdx.x % 32, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BMAX; ++b) {
                if (b < a.batch) atomicAdd(s.acc + b * a.n + col, c[b] * w);
            }
        });
    }
}

/// Adds this block's image to the global slot of `pass`, waits for every
/// block, clears the slot two passes ahead (read by everyone a pass ago,
/// written again only after the next grid sync), and loads the sum into
/// `out` for the thread's elements. Leaves the shared image zeroed.
/// The two-phase form of gather_image: every block writes its image out;
/// after a grid sync each block sums a slice of the elements over all
/// blocks' images (in block order) into the slot; after a second sync every
/// block loads the whole slot.
template <int EPT>
__device__ void gather_image_two_phase(cg::grid_group& grid, const Args& a, const Shared& s,
                                       int& pass, float (&out)[EPT])
{
    const int total = a.batch * a.n;
    __syncthreads();
    float* mine = a.partial + static_cast<size_type>(blockIdx.x) * total;
    for (int j = threadIdx.x; j < total; j += blockDim.x) {
        mine[j] = s.acc[j];
        s.acc[j] = 0.0f;
    }
    grid.sync();
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
    grid.sync();
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = threadIdx.x + j * block_threads;
        out[j] = e < total ? __ldcg(slot + e) : 0.0f;
    }
    ++pass;
}

template <int EPT>
__device__ void gather_image(cg::grid_group& grid, const Args& a, const Shared& s, int& pass,
                             float (&out)[EPT])
{
    if (a.partial != nullptr) {
        gather_image_two_phase(grid, a, s, pass, out);
        return;
    }
    const int total = a.batch * a.n;
    __syncthreads();
    float* slot = a.ubuf + static_cast<size_type>(pass % 3) * total;
    // Each block starts at its own offset, so that the blocks' adds to one
    // address are spread over time instead of all arriving at once.
    const int start = static_cast<int>((static_cast<long long>(blockIdx.x) * total) / gridDim.x);
    for (int j0 = threadIdx.x; j0 < total; j0 += blockDim.x) {
        const int j = j0 + start < total ? j0 + start : j0 + start - total;
        const float v = s.acc[j];
        if (v != 0.0f) atomicAdd(slot + j, v);
        s.acc[j] = 0.0f;
    }
    grid.sync();
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

/// Sums 2 * BMAX doubles over the block (fixed order: identical in every
/// block); the result is in `out` for all threads on return.
template <int BMAX>
__device__ void block_sums(double (&v)[2 * BMAX], double* red, double* out)
{
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int k = 0; k < 2 * BMAX; ++k) {
        for (int o = 16; o > 0; o /= 2) v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
        if (lane == 0) red[warp * 2 * BMAX + k] = v[k];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int k = 0; k < 2 * BMAX; ++k) {
            double t = lane < warps ? red[lane * 2 * BMAX + k] : 0.0;
            for (int o = 16; o > 0; o /= 2) t += __shfl_down_sync(0xffffffffu, t, o);
            if (lane == 0) out[k] = t;
        }
    }
    __syncthreads();
}

/// Σ_t F_t(p, v) at pixel i of frame fb; `v` is the frame's image.
__device__ float regularizer_at(const Args& a, const float* state, const float* v, int fb,
                                index_t i)
{
    const index_t iy = i / a.grid.nx;
    const index_t ix = i - iy * a.grid.nx;
    float sum = 0.0f;
    int slot = 0;
    for (int t = 0; t < a.terms.count; ++t) {
        const RegularizerTerm& term = a.terms.term[t];
        const float* sb = needs_state(term.kind)
                              ? state + (static_cast<size_type>(slot++) * a.batch + fb) * a.n
                              : nullptr;
        sum += term_apply(term, sb, v, a.grid, ix, iy);
    }
    return sum;
}

/// The state of every stateful term from the block's x.
__device__ void prepare_state(const Args& a, const Shared& s)
{
    const int total = a.batch * a.n;
    for (int e = threadIdx.x; e < total; e += blockDim.x) {
        const int fb = e / a.n;
        const index_t i = e - fb * a.n;
        const index_t iy = i / a.grid.nx;
        const index_t ix = i - iy * a.grid.nx;
        int slot = 0;
        for (int t = 0; t < a.terms.count; ++t) {
            const RegularizerTerm& term = a.terms.term[t];
            if (!needs_state(term.kind)) continue;
            s.state[(static_cast<size_type>(slot++) * a.batch + fb) * a.n + i] =
                term_state(term, s.x + static_cast<size_type>(fb) * a.n, a.grid, ix, iy);
        }
    }
}

struct Element {
    bool valid;
    int frame;
    index_t i;  // pixel within the frame
};

/// The thread's j-th element of the batch. With one frame there is no
/// division (this runs several times per element and iteration).
__device__ __forceinline__ Element element_of(const Args& a, int j)
{
    Element el{};
    const int e = threadIdx.x + j * block_threads;
    el.valid = e < a.batch * a.n;
    if (a.batch == 1) {
        el.i = e;
    } else if (el.valid) {
        el.frame = e / a.n;
        el.i = e - el.frame * a.n;
    }
    return el;
}

template <int BMAX>
__device__ void add_to_frame(double (&v)[2 * BMAX], int frame, double v0, double v1)
{
#pragma unroll
    for (int f = 0; f < BMAX; ++f) {
        if (f == frame) {
            v[2 * f] += v0;
            v[2 * f + 1] += v1;
        }
    }
}

template <int BMAX, int EPT, class System>
__global__ void __launch_bounds__(block_threads, 1) persistent_cgnr_kernel(System sys, Args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float smem[];
    __shared__ CgnrScalars sc[BMAX];
    __shared__ double red[warps * 2 * BMAX];
    __shared__ double sums[2 * BMAX];

    __shared__ float reduction_sums[block_threads];
    const int total = a.batch * a.n;
    const Shared s{smem, smem + total, smem + 2 * total, smem + 3 * total, reduction_sums};
    const bool regularized = a.terms.count > 0;

    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 3 * total;
         j += gridDim.x * blockDim.x) {
        a.ubuf[j] = 0.0f;
    }
    for (int j = threadIdx.x; j < total; j += blockDim.x) {
        s.x[j] = a.x[j];
        s.acc[j] = 0.0f;
    }
    grid.sync();

    int pass = 0;
    float h[EPT], g[EPT], u[EPT];

    // r0 = A x0 − b;  h0 = Aᵀ r0;  Aᵀ b (into u) for the stop test's reference
    row_pass<BMAX, Pass::residual>(sys, a, s, sc);
    gather_image(grid, a, s, pass, h);
    row_pass<BMAX, Pass::adjoint_b>(sys, a, s, sc);
    gather_image(grid, a, s, pass, u);
    // g0 = h0 + F(x0, x0);  d0 = −g0;  ‖g0‖²
    if (regularized) {
        prepare_state(a, s);
        __syncthreads();
    }
    double v[2 * BMAX];
#pragma unroll
    for (int k = 0; k < 2 * BMAX; ++k) v[k] = 0.0;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const Element el = element_of(a, j);
        g[j] = h[j];
        if (!el.valid) continue;
        if (regularized) {
            g[j] += regularizer_at(a, s.state, s.x + el.frame * a.n, el.frame, el.i);
        }
        s.d[threadIdx.x + j * block_threads] = -g[j];
        add_to_frame<BMAX>(v, el.frame, static_cast<double>(g[j]) * g[j],
                           static_cast<double>(u[j]) * u[j]);
    }
    block_sums<BMAX>(v, red, sums);
    if (threadIdx.x == 0) {
        for (int f = 0; f < a.batch; ++f) {
            sc[f] = a.scalars[f];
            cgnr_scalars_begin(sc[f], a.params, sums[2 * f], sums[2 * f + 1]);
        }
    }
    __syncthreads();

    for (int k = 0;; ++k) {
        bool any = false;
        for (int f = 0; f < a.batch; ++f) any = any || sc[f].status == SolveStatus::running;
        if (!any) break;

        // u_k = Aᵀ(A d_k)   (CGLS1: q_k = A d_k kept)
        row_pass<BMAX, Pass::normal>(sys, a, s, sc);
        gather_image(grid, a, s, pass, u);
        // e_k = u_k + F(x_k, d_k) (into the idle scatter image);
        // f_k = d_kᵀ e_k;  g_kᵀ d_k
#pragma unroll
        for (int k2 = 0; k2 < 2 * BMAX; ++k2) v[k2] = 0.0;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of(a, j);
            if (!el.valid) continue;
            const int e = threadIdx.x + j * block_threads;
            float ej = u[j];
            if (regularized) {
                ej += regularizer_at(a, s.state, s.d + el.frame * a.n, el.frame, el.i);
            }
            s.acc[e] = ej;
            const double dj = s.d[e];
            add_to_frame<BMAX>(v, el.frame, dj * ej, static_cast<double>(g[j]) * dj);
        }
        block_sums<BMAX>(v, red, sums);
        // α_k = −(g_kᵀ d_k) / f_k, guarded
        if (threadIdx.x == 0) {
            for (int f = 0; f < a.batch; ++f) {
                if (sc[f].status != SolveStatus::running) continue;
                sc[f].f = sums[2 * f];
                sc[f].gd = sums[2 * f + 1];
                cgnr_scalars_alpha(sc[f]);
            }
        }
        __syncthreads();
        // x_{k+1} = x_k + α_k d_k;  fused: h_{k+1} = h_k + α_k u_k
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of(a, j);
            if (!el.valid || sc[el.frame].status != SolveStatus::running) continue;
            const int e = threadIdx.x + j * block_threads;
            const float alpha = static_cast<float>(sc[el.frame].alpha);
            s.x[e] += alpha * s.d[e];
            if (!a.cgls1) h[j] += alpha * u[j];
        }
        if (a.cgls1) {
            // r_{k+1} = r_k + α_k q_k;  h_{k+1} = Aᵀ r_{k+1}. The pass scatters
            // into the shared image, so e moves to u's registers meanwhile.
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                const int e = threadIdx.x + j * block_threads;
                u[j] = e < total ? s.acc[e] : 0.0f;
            }
            __syncthreads();
            for (int j = threadIdx.x; j < total; j += blockDim.x) s.acc[j] = 0.0f;
            __syncthreads();
            row_pass<BMAX, Pass::cgls1_r>(sys, a, s, sc);
            gather_image(grid, a, s, pass, h);
        } else if (a.replacement > 0 && (k + 1) % a.replacement == 0) {
            // residual replacement: h_{k+1} = Aᵀ(A x_{k+1} − b)
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                const int e = threadIdx.x + j * block_threads;
                u[j] = e < total ? s.acc[e] : 0.0f;
            }
            __syncthreads();
            for (int j = threadIdx.x; j < total; j += blockDim.x) s.acc[j] = 0.0f;
            __syncthreads();
            row_pass<BMAX, Pass::residual>(sys, a, s, sc);
            gather_image(grid, a, s, pass, h);
        } else {
#pragma unroll
            for (int j = 0; j < EPT; ++j) {
                const int e = threadIdx.x + j * block_threads;
                u[j] = e < total ? s.acc[e] : 0.0f;
                if (e < total) s.acc[e] = 0.0f;
            }
        }
        __syncthreads();  // x_{k+1} complete for the stencils
        // g_{k+1} = h_{k+1} + F(x_k, x_{k+1});  g_{k+1}ᵀ e_k;  ‖g_{k+1}‖²   (u holds e_k)
#pragma unroll
        for (int k2 = 0; k2 < 2 * BMAX; ++k2) v[k2] = 0.0;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of(a, j);
            g[j] = h[j];
            if (!el.valid) continue;
            if (regularized) {
                g[j] += regularizer_at(a, s.state, s.x + el.frame * a.n, el.frame, el.i);
            }
            const double gj = g[j];
            add_to_frame<BMAX>(v, el.frame, gj * u[j], gj * gj);
        }
        block_sums<BMAX>(v, red, sums);
        // β_k and the stop tests
        if (threadIdx.x == 0) {
            for (int f = 0; f < a.batch; ++f) {
                if (sc[f].status != SolveStatus::running) continue;
                cgnr_scalars_end(sc[f], a.params, sums[2 * f], sums[2 * f + 1]);
            }
        }
        __syncthreads();
        // d_{k+1} = −g_{k+1} + β_k d_k
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const Element el = element_of(a, j);
            if (!el.valid || sc[el.frame].status != SolveStatus::running) continue;
            const int e = threadIdx.x + j * block_threads;
            s.d[e] = -g[j] + static_cast<float>(sc[el.frame].beta) * s.d[e];
        }
        // the lag moves on: state from x_{k+1}
        if (regularized) prepare_state(a, s);
        __syncthreads();
    }

    if (blockIdx.x != 0) return;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const int e = threadIdx.x + j * block_threads;
        if (e >= total) continue;
        a.h[e] = h[j];
        a.g[e] = g[j];
    }
    for (int j = threadIdx.x; j < total; j += blockDim.x) {
        a.x[j] = s.x[j];
        a.d[j] = s.d[j];
    }
    if (threadIdx.x < a.batch) a.scalars[threadIdx.x] = sc[threadIdx.x];
}

// --- host side ---------------------------------------------------------------------

/// (frames per block, elements per thread) shapes that are compiled.
struct Shape {
    int bmax;
    int ept;
};
constexpr Shape shapes[] = {{1, 4}, {4, 12}};

int stateful_terms(const RegularizerTerms& terms)
{
    int count = 0;
    for (int t = 0; t < terms.count; ++t) count += needs_state(terms.term[t].kind) ? 1 : 0;
    return count;
}

std::size_t shared_bytes(const PersistentCgnrProblem& p)
{
    const std::size_t total = static_cast<std::size_t>(p.batch) * cols_of(p.system);
    return (3 + stateful_terms(p.terms)) * total * sizeof(float);
}

const Shape* shape_for(const PersistentCgnrProblem& p)
{
    const long long total = static_cast<long long>(p.batch) * cols_of(p.system);
    for (const Shape& s : shapes) {
        if (p.batch <= s.bmax && total <= static_cast<long long>(s.ept) * block_threads) return &s;
    }
    return nullptr;
}

template <int BMAX, int EPT, class System>
void launch_shape(const Executor& exec, const System& sys, Args args, std::size_t bytes)
{
    auto kernel = persistent_cgnr_kernel<BMAX, EPT, System>;
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

}  // namespace

std::size_t persistent_workspace_floats(const PersistentCgnrProblem& p)
{
    // Three slots, and the blocks' images for the two-phase reduction (one
    // block per SM; 256 covers every current GPU, checked at launch).
    const std::size_t total = static_cast<std::size_t>(p.batch) * cols_of(p.system);
    return (3 + (p.two_phase_reduction ? max_persistent_blocks : 0)) * total;
}

void launch_persistent_cgnr(const Executor& exec, const PersistentCgnrProblem& p,
                            float* workspace)
{
    const std::string why = persistent_cgnr_supports(exec, p);
    if (!why.empty()) throw std::invalid_argument{why};
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
              nullptr};
    if (p.two_phase_reduction) {
        if (sm_count(exec) > max_persistent_blocks) {
            throw std::runtime_error{"persistent CGNR kernel: more SMs than workspace blocks"};
        }
        args.partial = workspace + 3 * static_cast<std::size_t>(p.batch) * cols_of(p.system);
    }
    const Shape* shape = shape_for(p);
    const std::size_t bytes = shared_bytes(p);
    std::visit(
        [&](const auto& sys) {
            if (shape->bmax == 1) {
                launch_shape<1, 4>(exec, sys, args, bytes);
            } else {
                launch_shape<4, 12>(exec, sys, args, bytes);
            }
        },
        p.system);
}

}  // namespace recon::kernels::cuda

namespace recon::kernels {

std::string persistent_cgnr_supports(const Executor& exec, const PersistentCgnrProblem& p)
{
    using namespace cuda;
    if (exec.is_cpu()) return "the persistent kernel needs a CUDA executor";
    if (p.batch < 1) return "batch must be positive";
    if (p.cgls1 && p.q.data == nullptr) return "the CGLS1 form needs the q buffer";
    if (shape_for(p) == nullptr) {
        return "the persistent kernel keeps the batch's images in one block: batch <= 4 and "
               "batch * n <= 12288 (batch 1: n <= 4096); found batch " +
               std::to_string(p.batch) + ", n " + std::to_string(cols_of(p.system));
    }
    int limit = 0;
    RECON_CUDA_TRY(
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, exec.device()));
    const std::size_t static_bytes = 8 * 1024;  // scalars and reduction buffers
    if (shared_bytes(p) + static_bytes > static_cast<std::size_t>(limit)) {
        return "the persistent kernel needs " + std::to_string(shared_bytes(p)) +
               " bytes of shared memory per block for this batch and regularizer, the device "
               "allows " +
               std::to_string(limit);
    }
    return {};
}

}  // namespace recon::kernels
