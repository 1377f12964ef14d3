#pragma once
// The fused form's one-pass update and β step followed by the direction step
// (cgnr_step_update_direction) as one cooperative launch: every block
// updates its elements and stores its partial sums of gᵀe and ‖g‖², a
// grid-wide sync, then every block sums its frame's partials in one fixed
// order, runs the scalar code on its own copy of the scalars and moves d.
// One grid sync instead of a kernel boundary and a reduction's ticket tail.
// Three kernels take this shape: the flat one (update_direction_kernel in
// cgnr_kernels.cu, any system), the parallel-beam one that also moves the
// kept pair images of d (parallel2d_step_kernel), and the parallel-beam
// adjoint of one frame that runs the dot step and this step after its view
// loop with a single grid sync (p2::StepEpilogue: β from sums taken before
// the step, and this shape's second sync only where they cancel).

#include <cuda_runtime.h>

#include <utility>

#include "cgnr_ops.cuh"
#include "launch.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {

/// The vectors of the one-pass step (cgnr_step_update_beta) and the
/// direction step that follows it.
struct StepVectors {
    const float* u;
    const float* e;
    const float* fx;  // null without a regularizer: g is h_{k+1}
    float* d;
    float* x;
    float* h;
    float* g;        // may be h without a regularizer
    float2* pairs;   // the kept pair images of d (parallel2d_step_kernel only)
};

/// How the fused form's step after the normal product is launched
/// (RECON_UPDATE_DIRECTION, for comparing): `auto` (default) takes the
/// fewest launches that can run: where one parallel-beam frame keeps the
/// pair images of d and its adjoint takes mirrored tiles, the adjoint runs
/// the whole step after its view loop (cgnr_step_one_pass, and
/// cgnr_step_replacement after the refresh of h); else the cooperative
/// step. `cooperative` keeps the cooperative step a launch of its own;
/// `split` takes the update and β step and the direction step as two
/// launches. Anything else is an error naming the variable.
enum class StepLaunch { fewest, cooperative, split };  // the variable's choices, in order
StepLaunch step_launch();

/// Queues update_direction_kernel for `batch` frames of n elements, or
/// returns false where its blocks cannot all be resident at once (or the
/// device has no cooperative launch): the caller then takes the two
/// launches it replaces. `prepare` with terms: the state of every frame from
/// the new x, in the same pass.
bool launch_update_direction(const Executor& exec, const CgnrParams& params, int batch,
                             size_type n, const StepVectors& vectors, CgnrScalars* scalars,
                             const RegularizerPrepare& prepare);

/// Whether `blocks` blocks of `kernel` (`threads` each, `shared_bytes` of
/// dynamic shared memory, whose limit the caller has set) can all be
/// resident at once on the executor's device, as a cooperative launch needs
/// (false where the device has none).
inline bool cooperative_fits(const Executor& exec, const void* kernel, unsigned threads,
                             long long blocks, std::size_t shared_bytes = 0)
{
    return device_attribute(exec, cudaDevAttrCooperativeLaunch) != 0 &&
           static_cast<long long>(resident_per_sm(exec, kernel, threads, shared_bytes)) *
                   sm_count(exec) >=
               blocks;
}

/// Queues `kernel` as one cooperative launch of grid x block with
/// `shared_bytes` of dynamic shared memory on the executor's stream, or
/// returns false where cooperative_fits does not hold.
template <class... Params, class... Args>
bool launch_cooperative(const Executor& exec, void (*kernel)(Params...), dim3 grid, dim3 block,
                        std::size_t shared_bytes, Args&&... args)
{
    if (!cooperative_fits(exec, reinterpret_cast<const void*>(kernel),
                          block.x * block.y * block.z,
                          static_cast<long long>(grid.x) * grid.y * grid.z, shared_bytes)) {
        return false;
    }
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream_of(exec);
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    config.attrs = &cooperative;
    config.numAttrs = 1;
    RECON_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
    return true;
}

// --- device side -------------------------------------------------------------

/// The start of step (1), by one thread of the block: the frame's scalars
/// as they are (`before`, for step (3)), whether the frame steps (running,
/// and α's guards pass) and its α.
__device__ __forceinline__ void cooperative_alpha(const CgnrScalars* s, int frame,
                                                  CgnrScalars& before, bool& steps, float& alpha)
{
    before = s[frame];
    CgnrScalars local = before;
    steps = before.status == SolveStatus::running && cgnr_scalars_alpha(local);
    alpha = static_cast<float>(local.alpha);
}

/// The block's sum of two doubles, one from each thread (`t` its index in
/// the block of Warps warps), the warps added in their order, stored into
/// `slot` by thread 0. Every thread of the block calls it.
template <int Warps>
__device__ __forceinline__ void store_block_sum(double2 sum, int t, double2* slot)
{
    __shared__ double2 warp_sums[Warps];
    for (int offset = 16; offset > 0; offset /= 2) {
        sum.x += __shfl_down_sync(0xffffffffu, sum.x, offset);
        sum.y += __shfl_down_sync(0xffffffffu, sum.y, offset);
    }
    if (t % 32 == 0) warp_sums[t / 32] = sum;
    __syncthreads();
    if (t == 0) {
        double2 block{0.0, 0.0};
        for (int i = 0; i < Warps; ++i) {
            block.x += warp_sums[i].x;
            block.y += warp_sums[i].y;
        }
        *slot = block;
    }
}

/// Step (3) of the cooperative step, by the block's first warp (its `lane`):
/// the frame's `count` partials (gᵀe, ‖g‖²) summed in one fixed order, so
/// that every block gets the same bits; then α and cgnr_scalars_end on a
/// copy of the scalars the block took before the grid sync (`before`). The
/// block that `stores` writes the result for a frame that was running.
/// Returns, in lane 0, whether the frame moves on and its β.
__device__ __forceinline__ void cooperative_beta(unsigned lane, const double2* partials,
                                                 unsigned count, const CgnrScalars& before,
                                                 const CgnrParams& params, bool stores,
                                                 CgnrScalars* s, bool& moves, float& beta)
{
    const double2 total = warp_sum_partials(lane, partials, count);
    if (lane == 0) {
        CgnrScalars local = before;
        if (local.status == SolveStatus::running && cgnr_scalars_alpha(local)) {
            cgnr_scalars_end(local, params, total.x, total.y);
        }
        if (stores && before.status == SolveStatus::running) *s = local;
        moves = local.status == SolveStatus::running;
        beta = static_cast<float>(local.beta);
    }
}

}  // namespace recon::kernels::cuda
