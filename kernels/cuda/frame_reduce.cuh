#pragma once
// One launch that walks every element of each frame, may update elements on
// the way (the epilogue of a vector update), sums two products per frame in
// double, and hands the two sums of each frame to a finishing function run
// once per frame on the device (so scalars never travel to the host).
//
// Grid: (blocks_per_frame, batch). With several blocks per frame the block
// sums meet in double atomics; the last block to arrive (ticket counter)
// finishes the frame and resets the accumulators to zero for the next call
// (frame_reduce_arrive, which a product kernel's epilogue uses as well).

#include "launch.cuh"

namespace recon::kernels::cuda {

constexpr int reduce_threads = 512;

/// Hands one block's two sums of `frame` to the frame's total: with one
/// block, op.finish at once; otherwise the sums meet in double atomics and
/// the last of `blocks` blocks to arrive (ticket counter) finishes the frame
/// and resets its accumulators to zero. One thread per block and frame.
template <class Op>
__device__ void frame_reduce_arrive(ReductionScratch scratch, int frame, double2 acc,
                                    unsigned blocks, const Op& op)
{
    if (blocks == 1) {
        op.finish(frame, acc.x, acc.y);
        return;
    }
    double* sums = scratch.sums + 2 * frame;
    atomicAdd(sums, acc.x);
    atomicAdd(sums + 1, acc.y);
    __threadfence();
    const bool last = atomicAdd(scratch.tickets + frame, 1u) == blocks - 1;
    if (last) {
        __threadfence();
        const double s0 = take_double(sums);
        const double s1 = take_double(sums + 1);
        scratch.tickets[frame] = 0;
        op.finish(frame, s0, s1);
    }
}

/// Op must provide:
///   __device__ bool active(int frame) const;           // skip the frame?
///   __device__ double2 element(int frame, size_type i) const;  // may write
///   __device__ void finish(int frame, double s0, double s1) const;
template <class Op>
__global__ void __launch_bounds__(reduce_threads)
    frame_reduce_kernel(size_type n, Op op, ReductionScratch scratch)
{
    __shared__ double buffer[64];
    const int frame = blockIdx.y;
    if (!op.active(frame)) return;  // uniform over the frame's blocks
    double2 acc{0.0, 0.0};
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const double2 v = op.element(frame, i);
        acc.x += v.x;
        acc.y += v.y;
    }
    acc = block_sum2(acc, buffer);
    if (threadIdx.x == 0) frame_reduce_arrive(scratch, frame, acc, gridDim.x, op);
}

/// Queues the reduction of `batch` frames of `n` elements each.
template <class Op>
void launch_frame_reduce(const Executor& exec, int batch, size_type n, const Op& op)
{
    if (batch > max_frames) {
        throw std::invalid_argument{"CUDA reductions support at most " +
                                    std::to_string(max_frames) + " frames per call, found " +
                                    std::to_string(batch)};
    }
    // Enough blocks to fill the device across all frames (these passes are
    // latency-bound), at least one element per thread. (Two per thread left
    // ct_256's 65,536 pixels on 64 blocks: its graph solve with TV took
    // 18.8 ms against 18.3 ms, H100; four times the blocks per frame, or
    // blocks of 256 threads, were slower for 4 frames.)
    const long long per_block = static_cast<long long>(reduce_threads);
    long long blocks = (n + per_block - 1) / per_block;
    const long long fill = (2LL * sm_count(exec) + batch - 1) / batch;
    if (blocks > fill) blocks = fill;
    if (blocks < 1) blocks = 1;
    const dim3 grid{static_cast<unsigned>(blocks), static_cast<unsigned>(batch)};
    frame_reduce_kernel<<<grid, reduce_threads, 0, stream_of(exec)>>>(n, op,
                                                                      reduction_scratch(exec));
    RECON_CUDA_CHECK_LAUNCH();
}

}  // namespace recon::kernels::cuda
