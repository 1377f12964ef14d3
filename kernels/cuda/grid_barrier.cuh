#pragma once
// The grid-wide barrier of the persistent kernels (one block per SM, the
// whole solve in one launch), in place of cooperative groups' grid.sync():
// the same word of the cooperative launch and the same protocol (block 0
// adds 2^31 − (blocks − 1), the others 1, with release semantics; all have
// arrived when the top bit flips), but thread 0 polls with relaxed loads
// and makes one acquire load at the end, where grid.sync() polls with
// acquire loads, each of which invalidates the SM's L1 (CCTL.IVALL).
//
// Measured on an H200, 125 blocks of 512 threads (one per SM), each storing
// 96 floats before the barrier and checking another block's after: 2,313
// cycles (1.17 µs) a barrier against 2,559 (1.29 µs) for grid.sync(). What
// remains is latency: the release's fence ~600 cycles, the add's arrival
// and the polls' round trip ~1,270, the two block barriers ~560. A tree of
// counters and a cluster barrier with one arrival per cluster took ~3,640.
// In `recon bench` (H200, alternating with grid.sync() twice): 4 frames on
// the normal matrix 2.94 → 2.82 ms, one frame 1.84 → 1.79 ms, the staged
// rows 3.65 → 3.59 ms (docs/gpu-performance.md, history v21). The graph's
// cooperative step kernels (several blocks per SM, one barrier a launch)
// keep grid.sync(): with this barrier they took 0.5 % longer.
//
// The two `if`s and the three-axis thread and block tests are written as
// cooperative groups writes them: in that shape ptxas keeps the one-frame
// normal-matrix kernel's loop at its registers (8 bytes of spills for the
// stored system); with one `if` and `threadIdx.x == 0` it spilled 92, and
// that kernel took 28 % longer.

#include <cooperative_groups.h>

namespace recon::kernels::cuda {

/// Every thread of every block waits until all blocks of the grid have
/// arrived; writes before it (any thread, any block) are visible to reads
/// after it, plain loads through L1 included. Only in kernels launched
/// cooperatively; every thread of the block must call it.
__device__ __forceinline__ void grid_barrier()
{
    // the counter the driver keeps for a cooperative launch (grid.sync()'s),
    // through cooperative groups' own accessor for the driver's ABI
    // (cooperative_groups/details/driver_abi.h): no word of our own to
    // allocate, clear or pass, and a toolkit that moves it fails to compile
    unsigned* const word = &cooperative_groups::details::get_grid_workspace()->barrier;
    const bool block_master = threadIdx.x + threadIdx.y + threadIdx.z == 0;
    unsigned arrived = 0;
    __syncthreads();
    if (block_master) {
        const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
        const bool grid_master = blockIdx.x + blockIdx.y + blockIdx.z == 0;
        const unsigned add = grid_master ? 0x80000000u - (blocks - 1) : 1u;
        asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;"
                     : "=r"(arrived) : "l"(word), "r"(add) : "memory");
    }
    if (block_master) {
        unsigned now;
        do {
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(word) : "memory");
        } while (((arrived ^ now) & 0x80000000u) == 0);
        // the acquire that makes the other blocks' writes visible (and
        // invalidates this SM's L1, CCTL.IVALL in the SASS)
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(word) : "memory");
    }
    __syncthreads();
}

}  // namespace recon::kernels::cuda
