#pragma once
// What the two normal-matrix kernels share (normal_matrix_cgnr.cu for one
// frame, normal_matrix_batch_cgnr.cu for batches of 2 to 4): the block's
// shape, the block's share of the rows of A, the phase clock, and the
// host's check that a kernel's blocks all fit on the device at once. Each
// kernel lays out its entries of G itself (the one frame's in float for
// its FMAs, the batch's as the tensor cores' operands).

#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "cooperative_step.cuh"
#include "cuda_check.cuh"
#include "kernels/common.hpp"
#include "kernels/executor.hpp"
#include "kernels/persistent.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda::normal_matrix {

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
constexpr int block_rows = 24;                      // rows of G a block holds
constexpr int max_cols = 3072;                      // the most columns (n) G may have

enum StepFlags : int {
    step_taken = 1,  // α was applied: x and h move
    beta_known = 2,  // β and the stop tests done
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

/// The one rounding of x + α v and −g + β d, wherever a copy of an element
/// is moved (the column owners and warp 0's lanes must agree bit for bit).
__device__ __forceinline__ float stepped(float v, float alpha, float w) { return __fmaf_rn(alpha, w, v); }
__device__ __forceinline__ float next_direction(float g, float beta, float d)
{
    return __fmaf_rn(beta, d, -g);
}

/// G: the [n][n] normal matrix, row by row.
struct Gram {
    const float* entries;
    int n;
};

/// G(row, col), 0 past n (the blocks' rows and the layouts' columns run to
/// whole tiles).
__device__ __forceinline__ float gram_entry(Gram gram, int row, int col)
{
    return row < gram.n && col < gram.n
               ? __ldg(gram.entries + static_cast<size_type>(row) * gram.n + col)
               : 0.0f;
}

/// *to += v, four floats in one atomic on sm_90 (one at a time before).
__device__ __forceinline__ void add_four(float4* to, float4 v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(to, v);
#else
    float* const f = reinterpret_cast<float*>(to);
    atomicAdd(f, v.x);
    atomicAdd(f + 1, v.y);
    atomicAdd(f + 2, v.z);
    atomicAdd(f + 3, v.w);
#endif
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

inline int blocks_for_rows(index_t n) { return static_cast<int>((n + block_rows - 1) / block_rows); }

/// Why `kernel` cannot run n columns on exec's device (empty: it can); lets
/// it take its shared memory (`bytes` of dynamic shared memory a block).
template <class Kernel>
std::string kernel_fits(const Executor& exec, Kernel* kernel_function, index_t n, std::size_t bytes)
{
    const auto kernel = reinterpret_cast<const void*>(kernel_function);
    cudaFuncAttributes attributes{};
    RECON_CUDA_TRY(cudaFuncGetAttributes(&attributes, kernel));
    const int limit = device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin);
    if (bytes + attributes.sharedSizeBytes > static_cast<std::size_t>(limit)) {
        return "the normal-matrix solve needs " + std::to_string(bytes + attributes.sharedSizeBytes) +
               " bytes of shared memory per block, the device allows " + std::to_string(limit);
    }
    allow_dynamic_shared(exec, kernel, bytes);
    if (!cooperative_fits(exec, kernel, threads, blocks_for_rows(n), bytes)) {
        return "the normal-matrix solve's blocks do not all fit on the device at once";
    }
    return {};
}

/// Queues `kernel` on exec's stream as one cooperative launch of a block
/// per 24 rows of G, with the shared memory its entries take (`bytes`).
template <class... Params, class... Args>
void launch_on_rows(const Executor& exec, std::size_t bytes, void (*kernel)(Params...), index_t n,
                    Args&&... args)
{
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), bytes);
    if (!launch_cooperative(exec, kernel, dim3(blocks_for_rows(n)), dim3(threads), bytes,
                            std::forward<Args>(args)...)) {
        throw std::runtime_error{"normal-matrix solve: its blocks do not all fit on the device"};
    }
}

/// Fills what the one-frame and the batch kernel's arguments share (the
/// problem, its buffers, the phase clock's switch); each launch adds its
/// workspace. `KernelArgs` names the fields alike.
template <class KernelArgs>
void set_problem(KernelArgs& a, const PersistentCgnrProblem& p)
{
    a.params = p.params;
    a.replacement = p.residual_replacement;
    a.n = static_cast<int>(cols_of(p.system));
    a.m = rows_of(p.system);
    a.gram = p.normal_matrix.data;
    a.b = p.b.data;
    a.x = p.x.data;
    a.h = p.h.data;
    a.g = p.g.data;
    a.d = p.d.data;
    a.scalars = p.scalars.data;
    a.phases = std::getenv("RECON_PERSISTENT_PHASES") != nullptr ? 1 : 0;
}

}  // namespace recon::kernels::cuda::normal_matrix
