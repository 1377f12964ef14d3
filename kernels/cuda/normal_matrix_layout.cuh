#pragma once
// What the two normal-matrix kernels share (normal_matrix_cgnr.cu for one
// frame, normal_matrix_batch_cgnr.cu for batches of 2 to 4): the block's
// shape, each thread's entries of G in registers and shared memory, the
// block's share of the rows of A, the phase clock, and the host's check
// that a kernel's blocks all fit on the device at once.

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
constexpr int groups = 2;                           // row groups of a block
constexpr int group_threads = threads / groups;     // 256
constexpr int group_warps = group_threads / 32;     // 8
constexpr int group_rows = 12;                      // rows of G per group
constexpr int block_rows = groups * group_rows;     // 24
constexpr int thread_cols = 12;                     // columns per thread
constexpr int max_cols = thread_cols * group_threads;  // 3,072
constexpr int entries = group_rows * thread_cols;   // G entries per thread: 144
constexpr int in_registers = 32;
constexpr int in_shared = entries - in_registers;   // 112 slots of `threads` floats: 224 KB
constexpr std::size_t shared_bytes = static_cast<std::size_t>(in_shared) * threads * sizeof(float);

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

static_assert(in_registers % 2 == 0, "the entries in shared memory start a pair");

/// Where entries p and p + 1 (p ≥ in_registers, p even) live in shared
/// memory: pairs of slots, each thread's two entries side by side, so that
/// they come in one 8-byte load (a warp's is two lines, as two 4-byte loads
/// are; half the load instructions). The index counts float2s.
__device__ __forceinline__ int pair_index(int p)
{
    return (p - in_registers) / 2 * threads + static_cast<int>(threadIdx.x);
}

/// Where entry p ≥ in_registers lives, counted in floats.
__device__ __forceinline__ int slot_index(int p) { return 2 * pair_index(p) + (p - in_registers) % 2; }

/// The thread's 144 entries of G (which row and column each one is, is the
/// kernel's layout): the first in_registers in registers, the others in
/// shared-memory slots (slot_index).
struct Entries {
    float reg[in_registers];
    const float* slots;

    /// Entries p and p + 1, p even (in shared memory: one 8-byte load).
    __device__ __forceinline__ float2 pair(int p) const
    {
        if (p < in_registers) {
            return float2{reg[p < in_registers ? p : 0], reg[p + 1 < in_registers ? p + 1 : 0]};
        }
        return reinterpret_cast<const float2*>(slots)[pair_index(p)];
    }
};

/// G: the [n][n] normal matrix, row by row.
struct Gram {
    const float* entries;
    int n;
};

/// Which of the block's entries of G a thread takes, with the block's
/// threads in `Groups` row groups: thread t of group g takes rows
/// 24 b + R g + r (R = 24 / Groups rows) at columns t, t + T, t + 2 T, ...
/// (T = threads / Groups), entry p = c·R + r being G(24 b + R g + r,
/// column(c)). Every layout gives a thread the same 144 entries' slots.
template <int Groups>
struct EntryLayout {
    static constexpr int group_threads = threads / Groups;
    static constexpr int group_rows = block_rows / Groups;
    static constexpr int thread_cols = max_cols / group_threads;
    static_assert(group_rows * thread_cols == entries, "144 entries a thread");

    __device__ __forceinline__ static int column(int c)
    {
        return c * group_threads + threadIdx.x % group_threads;
    }

    __device__ __forceinline__ static float entry(Gram gram, int p)
    {
        const int row =
            blockIdx.x * block_rows + threadIdx.x / group_threads * group_rows + p % group_rows;
        const int col = column(p / group_rows);
        return row < gram.n && col < gram.n
                   ? __ldg(gram.entries + static_cast<size_type>(row) * gram.n + col)
                   : 0.0f;
    }

    /// The thread's entries from G in device memory (each thread writes only
    /// its own slots).
    __device__ __forceinline__ static Entries load(Gram gram, float* slots)
    {
        Entries e{{}, slots};
#pragma unroll
        for (int p = 0; p < in_registers; ++p) e.reg[p] = entry(gram, p);
#pragma unroll 16
        for (int p = in_registers; p < entries; ++p) {
            slots[slot_index(p)] = entry(gram, p);
        }
        return e;
    }
};

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
/// it take its shared memory.
template <class Kernel>
std::string kernel_fits(const Executor& exec, Kernel* kernel_function, index_t n)
{
    const auto kernel = reinterpret_cast<const void*>(kernel_function);
    cudaFuncAttributes attributes{};
    RECON_CUDA_TRY(cudaFuncGetAttributes(&attributes, kernel));
    const int limit = device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin);
    if (shared_bytes + attributes.sharedSizeBytes > static_cast<std::size_t>(limit)) {
        return "the normal-matrix solve needs " +
               std::to_string(shared_bytes + attributes.sharedSizeBytes) +
               " bytes of shared memory per block, the device allows " + std::to_string(limit);
    }
    allow_dynamic_shared(exec, kernel, shared_bytes);
    if (!cooperative_fits(exec, kernel, threads, blocks_for_rows(n), shared_bytes)) {
        return "the normal-matrix solve's blocks do not all fit on the device at once";
    }
    return {};
}

/// Queues `kernel` on exec's stream as one cooperative launch of a block
/// per 24 rows of G, with the shared memory its entries take.
template <class... Params, class... Args>
void launch_on_rows(const Executor& exec, void (*kernel)(Params...), index_t n, Args&&... args)
{
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), shared_bytes);
    if (!launch_cooperative(exec, kernel, dim3(blocks_for_rows(n)), dim3(threads), shared_bytes,
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
