#pragma once
// Launch helpers shared by the CUDA primitives: the stream of an executor,
// grid sizes, block-wide reductions, and per-stream scratch memory.

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <string_view>

#include "cuda_check.cuh"
#include "kernels/common.hpp"
#include "kernels/executor.hpp"

namespace recon::kernels::cuda {

/// The stream kernels of `exec` are queued on; a null stream in the
/// executor means the per-thread default stream (which, unlike the legacy
/// default stream, can be captured into a graph).
inline cudaStream_t stream_of(const Executor& exec)
{
    return exec.stream() != nullptr ? exec.stream() : cudaStreamPerThread;
}

/// An attribute of the executor's device (cached per device and attribute).
int device_attribute(const Executor& exec, cudaDeviceAttr attribute);

/// Multiprocessor count of the executor's device.
int sm_count(const Executor& exec);

/// Lets `kernel` take `bytes` of dynamic shared memory on the executor's
/// device (the opt-in above 48 KB); asks the driver only when a launch needs
/// more than the kernel was given before on that device.
void allow_dynamic_shared(const Executor& exec, const void* kernel, std::size_t bytes);

/// Which of `choices` the environment variable `variable` names (for the
/// kernels' switches, for comparing their paths): 0, the first, when it is
/// unset; anything else is an error naming the variable, the choices and
/// the value.
int environment_choice(const char* variable, std::initializer_list<std::string_view> choices);

/// Blocks of `kernel` (`threads` each, `shared_bytes` of dynamic shared
/// memory) that one SM of the executor's device holds at once (asked once
/// per device, kernel, block size and shared memory).
int resident_per_sm(const Executor& exec, const void* kernel, unsigned threads,
                    std::size_t shared_bytes = 0);

/// Blocks of `threads` covering `work` items, capped at `cap` (grid-stride
/// loops cover the rest); at least 1.
inline unsigned blocks_for(long long work, int threads, long long cap = 1 << 20)
{
    long long b = (work + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return static_cast<unsigned>(b);
}

/// Device memory owned by the backend for one stream and purpose, reused by
/// every call on that stream (kernels on one stream never overlap). A buffer
/// that must grow is replaced and the old one is kept until exit, because a
/// captured graph may still refer to it. With `zeroed`, new memory is
/// cleared by a kernel queued on the stream (legal under graph capture).
enum class ScratchSlot { reduction, reduction_partials, measurement, block_sums, count_ };
void* scratch(const Executor& exec, ScratchSlot slot, std::size_t bytes, bool zeroed);

/// What a reduction over many blocks needs to add its blocks' sums in one
/// fixed order (frame_reduce_arrive): a slot for each block's two sums of
/// each frame, and a ticket counter per frame (up to `max_frames`), zero
/// between kernels.
struct ReductionScratch {
    double2* partials;  // [frame][block]
    unsigned* tickets;  // [frame]
};
constexpr int max_frames = 1024;
/// Sized for `frames` frames of `blocks` blocks each. The tickets are
/// zeroed by a kernel when first made: the first call on a stream must not
/// be inside a graph capture (SolveGraph::capture makes them before it).
ReductionScratch reduction_scratch(const Executor& exec, long long frames, long long blocks);

// --- device side -------------------------------------------------------------

/// Sum over the block of two doubles; the result is valid in thread 0.
/// Every thread of the block must call it. `buffer` holds 2 * 32 doubles.
__device__ __forceinline__ double2 block_sum2(double2 v, double* buffer)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        v.x += __shfl_down_sync(0xffffffffu, v.x, offset);
        v.y += __shfl_down_sync(0xffffffffu, v.y, offset);
    }
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int warps = (blockDim.x + 31) / 32;
    __syncthreads();  // buffer may still be read by a previous call
    if (lane == 0) {
        buffer[2 * warp] = v.x;
        buffer[2 * warp + 1] = v.y;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? double2{buffer[2 * lane], buffer[2 * lane + 1]} : double2{0.0, 0.0};
        for (int offset = 16; offset > 0; offset /= 2) {
            v.x += __shfl_down_sync(0xffffffffu, v.x, offset);
            v.y += __shfl_down_sync(0xffffffffu, v.y, offset);
        }
    }
    return v;
}

}  // namespace recon::kernels::cuda
