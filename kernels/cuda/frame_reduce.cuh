#pragma once
// One launch that walks every element of each frame, may update elements on
// the way (the epilogue of a vector update), sums two products per frame in
// double, and hands the two sums of each frame to a finishing function run
// once per frame on the device (so scalars never travel to the host).
//
// Grid: (blocks_per_frame, batch). With several blocks per frame each block
// stores its sums in a slot of its own; the last block to arrive (ticket
// counter) adds the frame's slots in one fixed order and finishes the frame
// (frame_reduce_arrive, which a product kernel's epilogue uses as well), so
// that the sums, and all that follows from them, have the same bits in
// every run whichever block ends last.

#include "launch.cuh"
#include "warp_sums.cuh"

namespace recon::kernels::cuda {

constexpr int reduce_threads = 512;

/// Adds 1 to a frame's ticket and returns its value before: release for
/// the calling thread's stores before it (the block's partial sums), and
/// acquire for what it and, through a warp sync, its warp read after it
/// (the other blocks' partials, when it is the last). PTX's release and
/// acquire through one atomic; a __threadfence() on each side is a
/// sequentially consistent fence, slower.
__device__ __forceinline__ unsigned take_ticket(unsigned* ticket)
{
    unsigned before;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(before)
                 : "l"(ticket)
                 : "memory");
    return before;
}

/// Hands one block's sums of frames first .. first + frames − 1 (lane f of
/// the calling warp holds frame first + f's two sums, frames ≤ 32) to the
/// frames' totals: with one block, op.finish at once; otherwise the block
/// stores them in its slots (block `block` of `blocks`), and the last of a
/// frame's blocks to arrive (ticket counter) sums the frame's slots in
/// block order (warp_sum_partials), resets the ticket and runs op.finish.
/// One whole warp of each block calls it.
template <class Op>
__device__ void frame_reduce_arrive(ReductionScratch scratch, int first, int frames, double2 acc,
                                    unsigned block, unsigned blocks, const Op& op)
{
    const unsigned lane = threadIdx.x % 32;
    if (blocks == 1) {
        if (lane < static_cast<unsigned>(frames)) op.finish(first + lane, acc.x, acc.y);
        return;
    }
    bool last = false;
    if (lane < static_cast<unsigned>(frames)) {
        const int frame = first + static_cast<int>(lane);
        __stcg(scratch.partials + static_cast<size_type>(frame) * blocks + block, acc);
        last = take_ticket(scratch.tickets + frame) == blocks - 1;
    }
    const unsigned lasts_of_block = __ballot_sync(0xffffffffu, last);
    __syncwarp();  // orders the warp's loads below after the acquiring lane's ticket
    for (unsigned lasts = lasts_of_block; lasts != 0; lasts &= lasts - 1) {
        const int frame = first + __ffs(static_cast<int>(lasts)) - 1;
        const double2 total = warp_sum_partials<true>(
            lane, scratch.partials + static_cast<size_type>(frame) * blocks, blocks);
        if (lane == 0) {
            scratch.tickets[frame] = 0;
            op.finish(frame, total.x, total.y);
        }
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
    acc = block_sum2(acc, buffer);  // in thread 0
    if (threadIdx.x < 32) frame_reduce_arrive(scratch, frame, 1, acc, blockIdx.x, gridDim.x, op);
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
    frame_reduce_kernel<<<grid, reduce_threads, 0, stream_of(exec)>>>(
        n, op, reduction_scratch(exec, batch, blocks));
    RECON_CUDA_CHECK_LAUNCH();
}

}  // namespace recon::kernels::cuda
