// The CGNR step kernels on the GPU. Each dot product is summed in the same
// launch that walks its operands (and, where a step also updates a vector,
// in that update's pass); α, β and the stop tests are evaluated on the
// device by cgnr_scalars.hpp, the same code the CPU runs.

#include <cooperative_groups.h>

#include "cgnr_ops.cuh"
#include "cooperative_step.cuh"
#include "frame_reduce.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int threads = 256;

/// d = -g, ‖g‖² and ‖reference‖² (‖g‖² without one), then
/// cgnr_scalars_begin. Runs for every frame.
struct InitOp {
    CgnrParams params;
    const float* g;
    const float* reference;
    float* d;
    size_type n;
    CgnrScalars* s;

    __device__ bool active(int) const { return true; }
    __device__ double2 element(int frame, size_type i) const
    {
        const size_type k = frame * n + i;
        const float gi = g[k];
        d[k] = -gi;
        const double ri = reference != nullptr ? reference[k] : gi;
        return {static_cast<double>(gi) * gi, ri * ri};
    }
    __device__ void finish(int frame, double gg, double ref) const
    {
        cgnr_scalars_begin(s[frame], params, gg, ref);
    }
};

/// The dot step over u in memory: f = dᵀu, gd = gᵀd (frames still
/// running), or with a regularizer the folded step of StepDotsAt (every
/// frame's e written, f and gd stored for running frames).
struct StepDotsOp {
    StepDotsAt step;
    const float* u;

    __device__ bool active(int frame) const { return step.e != nullptr || running(step.s, frame); }
    __device__ double2 element(int frame, size_type i) const
    {
        step.aside(frame, i);
        return step.at(frame, i, u != nullptr ? u[frame * step.n + i] : 0.0f);
    }
    __device__ void finish(int frame, double f, double gd) const { step.finish(frame, f, gd); }
};

/// ge = gᵀe, gg = ‖g‖², then cgnr_scalars_end (β, count, stop tests).
struct StepBetaOp {
    CgnrParams params;
    const float* g;
    const float* e;
    size_type n;
    CgnrScalars* s;

    __device__ bool active(int frame) const { return running(s, frame); }
    __device__ double2 element(int frame, size_type i) const
    {
        const size_type k = frame * n + i;
        const double gi = g[k];
        return {gi * e[k], gi * gi};
    }
    __device__ void finish(int frame, double ge, double gg) const
    {
        cgnr_scalars_end(s[frame], params, ge, gg);
    }
};

/// g = fold; ge = gᵀe, gg = ‖g‖², then cgnr_scalars_end (for running frames).
struct StepBetaFoldedOp {
    CgnrParams params;
    RegularizerFold fold;
    int batch;
    const float* e;
    float* g;
    size_type n;
    CgnrScalars* s;

    __device__ bool active(int) const { return true; }
    __device__ double2 element(int frame, size_type i) const
    {
        const size_type k = frame * n + i;
        const float gi = fold_at(fold, batch, frame, i);
        g[k] = gi;
        const double gd = gi;
        return {gd * e[k], gd * gd};
    }
    __device__ void finish(int frame, double ge, double gg) const
    {
        if (running(s, frame)) cgnr_scalars_end(s[frame], params, ge, gg);
    }
};

/// α with its guards. Every block evaluates it on a private copy of the
/// frame's scalars; the first block's first thread also stores the result.
/// The other blocks may read the scalars while it is stored: they then read
/// either the α they computed themselves or a stopped status, so every block
/// agrees on whether and how far to step.
__device__ bool frame_alpha(CgnrScalars* s, int frame, float& alpha)
{
    if (!running(s, frame)) return false;
    CgnrScalars local = s[frame];
    const bool ok = cgnr_scalars_alpha(local);
    alpha = static_cast<float>(local.alpha);
    return ok;
}

/// α as step_update_kernel; x += α d; h_{k+1} = h_k + α u; g = h_k + fx +
/// α e (without fx: g = h_{k+1}, g may be h); ge = gᵀe, gg = ‖g‖², then
/// the frame's α (stored) and cgnr_scalars_end. Each element evaluates α
/// from the frame's scalars itself: a division per element, and the
/// reductions give a thread one or two elements.
struct UpdateBetaOp {
    CgnrParams params;
    const float* d;
    const float* u;
    const float* e;
    const float* fx;
    float* x;
    float* h;
    float* g;
    size_type n;
    CgnrScalars* s;

    __device__ bool active(int frame) const { return running(s, frame); }
    __device__ double2 element(int frame, size_type i) const
    {
        float alpha = 0.0f;
        if (!frame_alpha(s, frame, alpha)) return {0.0, 0.0};
        const size_type k = frame * n + i;
        const double gd = update_at(k, alpha, d, u, e, fx, x, h, g);
        return {gd * e[k], gd * gd};
    }
    __device__ void finish(int frame, double ge, double gg) const
    {
        // Every block took the same α; a frame whose α failed stops here.
        if (cgnr_scalars_alpha(s[frame])) cgnr_scalars_end(s[frame], params, ge, gg);
    }
};

__global__ void step_update_kernel(size_type n, const float* d, const float* u, float* x,
                                   float* h, CgnrScalars* s)
{
    const int frame = blockIdx.y;
    float alpha = 0.0f;
    const bool was_running = running(s, frame);
    const bool ok = frame_alpha(s, frame, alpha);
    __syncthreads();  // this block has read the scalars before its first thread writes
    if (blockIdx.x == 0 && threadIdx.x == 0 && was_running) {
        CgnrScalars local = s[frame];
        cgnr_scalars_alpha(local);
        s[frame].alpha = local.alpha;
        s[frame].status = local.status;
    }
    if (!ok) return;
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const size_type k = frame * n + i;
        x[k] += alpha * d[k];
        if (h != nullptr) h[k] += alpha * u[k];
    }
}

__global__ void update_residual_kernel(size_type m, const float* q, float* r,
                                       const CgnrScalars* s)
{
    const int frame = blockIdx.y;
    if (s[frame].status != SolveStatus::running) return;
    const float alpha = static_cast<float>(s[frame].alpha);
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < m;
         i += stride) {
        r[frame * m + i] += alpha * q[frame * m + i];
    }
}

/// d = -g + β d for the frames still running; WithState: in the same pass
/// the state of every frame from prepare.p, as regularizer_prepare.
template <bool WithState>
__global__ void direction_kernel(size_type n, int batch, const float* g, float* d,
                                 const CgnrScalars* s, RegularizerPrepare prepare)
{
    const int frame = blockIdx.y;
    const bool moves = s[frame].status == SolveStatus::running;
    if (!WithState && !moves) return;
    const float beta = static_cast<float>(s[frame].beta);
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const size_type k = frame * n + i;
        if (moves) d[k] = direction_at(g[k], beta, d[k]);
        if constexpr (WithState) {
            const Pixel px = prepare.grid.pixel(static_cast<index_t>(i));
            terms_prepare(prepare.terms, prepare.state.data, batch, frame,
                          prepare.p.data + frame * n, prepare.grid, px.ix, px.iy);
        }
    }
}

/// cgnr_step_update_beta and then the direction step (with its state)
/// in one cooperative launch, blocks (blockIdx.x) of one frame (blockIdx.y)
/// walking its n elements: (1) α from the frame's scalars; x, h and g; the
/// block's sums of gᵀe and ‖g‖² into partials; (2) a grid-wide sync; (3)
/// cooperative_beta, then d = −g + β d and, WithState, the state of every
/// frame from the new x (every x is written by then). The same operations
/// per element as the two launches it replaces.
template <bool WithState>
__global__ void __launch_bounds__(reduce_threads)
    update_direction_kernel(size_type n, CgnrParams params, int batch, StepVectors w,
                            CgnrScalars* s, RegularizerPrepare prepare, double2* partials)
{
    __shared__ CgnrScalars before;  // the frame's scalars at the start
    __shared__ double buffer[64];
    __shared__ float alpha, beta;
    __shared__ bool steps, moves;
    const int frame = blockIdx.y;
    const unsigned t = threadIdx.x;
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    const size_type first = static_cast<size_type>(blockIdx.x) * blockDim.x + t;

    // (1) α; x, h, g; this block's gᵀe and ‖g‖²
    if (t == 0) cooperative_alpha(s, frame, before, steps, alpha);
    __syncthreads();
    double2 sum{0.0, 0.0};
    if (steps) {
        for (size_type i = first; i < n; i += stride) {
            const size_type k = frame * n + i;
            const double gd = update_at(k, alpha, w.d, w.u, w.e, w.fx, w.x, w.h, w.g);
            sum.x += gd * w.e[k];
            sum.y += gd * gd;
        }
    }
    sum = block_sum2(sum, buffer);
    if (t == 0) partials[static_cast<size_type>(frame) * gridDim.x + blockIdx.x] = sum;

    // (2)
    cooperative_groups::this_grid().sync();

    // (3) β and the stop tests, every block alike; d and the state
    if (t < 32) {
        cooperative_beta(t, partials + static_cast<size_type>(frame) * gridDim.x, gridDim.x,
                         before, params, blockIdx.x == 0, s + frame, moves, beta);
    }
    __syncthreads();
    if (!WithState && !moves) return;  // uniform over the block
    for (size_type i = first; i < n; i += stride) {
        const size_type k = frame * n + i;
        if (moves) w.d[k] = direction_at(w.g[k], beta, w.d[k]);
        if constexpr (WithState) {
            const Pixel px = prepare.grid.pixel(static_cast<index_t>(i));
            terms_prepare(prepare.terms, prepare.state.data, batch, frame,
                          prepare.p.data + frame * n, prepare.grid, px.ix, px.iy);
        }
    }
}

dim3 frame_grid(const Executor& exec, size_type len, int batch)
{
    const long long fill = (4LL * sm_count(exec) + batch - 1) / batch;
    return {blocks_for(len, threads, fill), static_cast<unsigned>(batch)};
}

}  // namespace

void cgnr_init(const Executor& exec, const CgnrParams& params, int batch, View<const float> g,
               View<const float> reference, View<float> d, View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    launch_frame_reduce(exec, batch, n,
                        InitOp{params, g.data, reference.data, d.data, n, scalars.data});
}

void cgnr_step_dots(const Executor& exec, int batch, View<const float> d, View<const float> e,
                    View<const float> g, View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    const StepDotsAt step{{}, {}, batch, d.data, g.data, nullptr, nullptr, n, scalars.data};
    launch_frame_reduce(exec, batch, n, StepDotsOp{step, e.data});
}

void cgnr_step_dots_folded(const Executor& exec, int batch, const RegularizerFold& fold,
                           View<const float> d, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx)
{
    const size_type n = d.size / batch;
    const RegularizerFold at_x{fold.terms, fold.grid, fold.state, {}, x};
    const StepDotsAt step{fold, at_x, batch, d.data, g.data, e.data, fx.data, n, scalars.data};
    launch_frame_reduce(exec, batch, n, StepDotsOp{step, fold.base.data});
}

void cgnr_step_update_beta(const Executor& exec, const CgnrParams& params, int batch,
                           View<const float> d, View<const float> u, View<const float> e,
                           View<const float> fx, View<float> x, View<float> h, View<float> g,
                           View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    launch_frame_reduce(exec, batch, n,
                        UpdateBetaOp{params, d.data, u.data, e.data, fx.data, x.data, h.data,
                                     g.data, n, scalars.data});
}

void cgnr_step_update(const Executor& exec, int batch, View<const float> d, View<const float> u,
                      View<float> x, View<float> h, View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    step_update_kernel<<<frame_grid(exec, n, batch), threads, 0, stream_of(exec)>>>(
        n, d.data, u.data, x.data, h.data, scalars.data);
    RECON_CUDA_CHECK_LAUNCH();
}

void cgnr_update_residual(const Executor& exec, int batch, View<const float> q, View<float> r,
                          View<CgnrScalars> scalars)
{
    const size_type m = q.size / batch;
    update_residual_kernel<<<frame_grid(exec, m, batch), threads, 0, stream_of(exec)>>>(
        m, q.data, r.data, scalars.data);
    RECON_CUDA_CHECK_LAUNCH();
}

void cgnr_step_beta(const Executor& exec, const CgnrParams& params, int batch,
                    View<const float> g, View<const float> e, View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    launch_frame_reduce(exec, batch, n, StepBetaOp{params, g.data, e.data, n, scalars.data});
}

void cgnr_step_beta_folded(const Executor& exec, const CgnrParams& params, int batch,
                           const RegularizerFold& fold, View<const float> e, View<float> g,
                           View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    launch_frame_reduce(exec, batch, n,
                        StepBetaFoldedOp{params, fold, batch, e.data, g.data, n, scalars.data});
}

void cgnr_step_direction(const Executor& exec, int batch, View<const float> g, View<float> d,
                         View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    direction_kernel<false><<<frame_grid(exec, n, batch), threads, 0, stream_of(exec)>>>(
        n, batch, g.data, d.data, scalars.data, RegularizerPrepare{});
    RECON_CUDA_CHECK_LAUNCH();
}

void cgnr_step_direction_folded(const Executor& exec, int batch, View<const float> g,
                                View<float> d, View<CgnrScalars> scalars,
                                const RegularizerPrepare& prepare)
{
    const size_type n = g.size / batch;
    direction_kernel<true><<<frame_grid(exec, n, batch), threads, 0, stream_of(exec)>>>(
        n, batch, g.data, d.data, scalars.data, prepare);
    RECON_CUDA_CHECK_LAUNCH();
}

StepLaunch step_launch()
{
    return static_cast<StepLaunch>(
        environment_choice("RECON_UPDATE_DIRECTION", {"auto", "cooperative", "split"}));
}

bool launch_update_direction(const Executor& exec, const CgnrParams& params, int batch,
                             size_type n, const StepVectors& vectors, CgnrScalars* scalars,
                             const RegularizerPrepare& prepare)
{
    if (batch > max_frames) return false;
    // As many blocks per frame as the frame reductions take (these passes
    // are latency-bound), at least one element per thread.
    const long long fill = (2LL * sm_count(exec) + batch - 1) / batch;
    const dim3 grid{blocks_for(n, reduce_threads, fill), static_cast<unsigned>(batch)};
    const long long blocks = static_cast<long long>(grid.x) * grid.y;
    auto* partials = static_cast<double2*>(
        scratch(exec, ScratchSlot::block_sums, sizeof(double2) * blocks, false));
    return prepare.terms.count > 0
               ? launch_cooperative(exec, update_direction_kernel<true>, grid,
                                    dim3{reduce_threads}, 0, n, params, batch, vectors, scalars,
                                    prepare, partials)
               : launch_cooperative(exec, update_direction_kernel<false>, grid,
                                    dim3{reduce_threads}, 0, n, params, batch, vectors, scalars,
                                    prepare, partials);
}

}  // namespace recon::kernels::cuda
