#pragma once
// Kernels over the rows of A for every system model: A x (one thread per
// row, gathers), Aᵀ y and the fused Aᵀ(A d) (one thread per row, scatters
// into global atomics or into a per-block shared-memory image). The
// parallel-beam model's own kernels are in parallel2d_kernels.cuh. BT frames
// share each pass over a row; BT is a compile-time constant so that the
// per-frame sums live in registers.

#include <cuda_runtime.h>

#include "kernels/rows.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda {

// --- row generators for the device ----------------------------------------------

/// Stored, synthetic and parallel-beam rows: the shared generators of
/// rows.hpp.
template <class System, class F>
__device__ __forceinline__ void device_row(const System& v, index_t row, F&& f)
{
    for_each_entry(v, row, f);
}

/// Sliced ELLPACK-T rows as rows.hpp reads them, with 32-bit offsets inside
/// the slice and a shift for the usual slice size of 32.
template <class F>
__device__ __forceinline__ void device_row(const SlicedEllView& v, index_t row, F&& f)
{
    const index_t slice = v.slice_size == 32 ? row >> 5 : row / v.slice_size;
    const index_t lane = row - slice * v.slice_size;
    const size_type start = v.slice_offset[slice] + lane;
    const index_t* cols = v.col_idx + start;
    const float* values = v.values + start;
    const index_t width = v.slice_width[slice];
    for (index_t j = 0, k = 0; j < width; ++j, k += v.slice_size) f(__ldg(cols + k), __ldg(values + k));
}

/// The row's entries from entry `first` on, wrapping around (any order
/// gives the same sums). Scatters start each lane of a warp at a different
/// entry: entry j of neighbouring rows tends to fall in the same columns
/// (an ELLPACK slice's column j), so in-order scatters from 32 lanes pile
/// onto a few shared-memory banks. Measured on an H200: neutral for the
/// stored paper matrix; for synthetic rows the extra division per entry cost
/// more than it saved, so they keep their generation order.
template <class System, class F>
__device__ __forceinline__ void device_row_from(const System& v, index_t row, int, F&& f)
{
    device_row(v, row, f);
}

template <class F>
__device__ __forceinline__ void device_row_from(const SlicedEllView& v, index_t row, int first,
                                                F&& f)
{
    const index_t slice = v.slice_size == 32 ? row >> 5 : row / v.slice_size;
    const index_t lane = row - slice * v.slice_size;
    const size_type start = v.slice_offset[slice] + lane;
    const index_t* cols = v.col_idx + start;
    const float* values = v.values + start;
    const index_t width = v.slice_width[slice];
    if (width <= 0) return;
    index_t j = first % width;
    for (index_t t = 0; t < width; ++t) {
        const index_t k = j * v.slice_size;
        f(__ldg(cols + k), __ldg(values + k));
        j = j + 1 == width ? 0 : j + 1;
    }
}

// --- A x --------------------------------------------------------------------------

/// y[b][i] = Σ_j A_ij x[b][j] for BT frames; x strided by n, y by m. With
/// `sub` (the residual r = A x − b): the row sum is kept in double and b is
/// subtracted before rounding, as the CPU reference does.
template <int BT, class System, class Acc = float>
__global__ void apply_rows_kernel(System sys, index_t m, index_t n, const float* __restrict__ x,
                                  const float* __restrict__ sub, float* __restrict__ y)
{
    for (index_t row = blockIdx.x * blockDim.x + threadIdx.x; row < m;
         row += gridDim.x * blockDim.x) {
        Acc acc[BT];
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[b] = Acc{0};
        device_row(sys, row, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                acc[b] += static_cast<Acc>(w) * __ldg(x + static_cast<size_type>(b) * n + col);
            }
        });
#pragma unroll
        for (int b = 0; b < BT; ++b) {
            const size_type k = static_cast<size_type>(b) * m + row;
            y[k] = static_cast<float>(sub != nullptr ? acc[b] - __ldg(sub + k) : acc[b]);
        }
    }
}

/// A x with x staged in shared memory first (the founding paper's
/// shared-memory variant, one frame): gathers hit shared memory.
template <class System>
__global__ void apply_rows_shared_x_kernel(System sys, index_t m, index_t n,
                                           const float* __restrict__ x, float* __restrict__ y)
{
    extern __shared__ float xs[];
    for (index_t j = threadIdx.x; j < n; j += blockDim.x) xs[j] = x[j];
    __syncthreads();
    for (index_t row = blockIdx.x * blockDim.x + threadIdx.x; row < m;
         row += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        device_row(sys, row, [&](index_t col, float w) { acc += w * xs[col]; });
        y[row] = acc;
    }
}

// --- Aᵀ y and Aᵀ(A d) by rows -----------------------------------------------------

/// The coefficient each row scatters: y_i (Aᵀ y), or q_i = (A d)_i formed
/// from the same row first (Aᵀ(A d), storing q when asked).
template <int BT, bool Fused, class System>
__device__ __forceinline__ void row_coefficients(const System& sys, index_t row, index_t m,
                                                 index_t n, const float* __restrict__ in,
                                                 float* __restrict__ q, float (&c)[BT])
{
    if constexpr (Fused) {
#pragma unroll
        for (int b = 0; b < BT; ++b) c[b] = 0.0f;
        device_row(sys, row, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BT; ++b) c[b] += w * __ldg(in + static_cast<size_type>(b) * n + col);
        });
        if (q != nullptr) {
#pragma unroll
            for (int b = 0; b < BT; ++b) q[static_cast<size_type>(b) * m + row] = c[b];
        }
    } else {
#pragma unroll
        for (int b = 0; b < BT; ++b) c[b] = __ldg(in + static_cast<size_type>(b) * m + row);
    }
}

/// out[b] += Aᵀ c[b] with red.global.add; `out` must be zeroed before.
template <int BT, bool Fused, class System>
__global__ void scatter_rows_global_kernel(System sys, index_t m, index_t n,
                                           const float* __restrict__ in, float* __restrict__ out,
                                           float* __restrict__ q)
{
    for (index_t row = blockIdx.x * blockDim.x + threadIdx.x; row < m;
         row += gridDim.x * blockDim.x) {
        float c[BT];
        row_coefficients<BT, Fused>(sys, row, m, n, in, q, c);
        device_row_from(sys, row, threadIdx.x % 32, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BT; ++b) atomicAdd(out + static_cast<size_type>(b) * n + col, c[b] * w);
        });
    }
}

/// The same into a per-block image in shared memory (BT * n floats), added
/// to `out` (zeroed before) once per block at the end.
template <int BT, bool Fused, class System>
__global__ void __launch_bounds__(1024) scatter_rows_shared_kernel(System sys, index_t m, index_t n,
                                           const float* __restrict__ in, float* __restrict__ out,
                                           float* __restrict__ q)
{
    extern __shared__ float acc[];
    for (index_t j = threadIdx.x; j < BT * n; j += blockDim.x) acc[j] = 0.0f;
    __syncthreads();
    for (index_t row = blockIdx.x * blockDim.x + threadIdx.x; row < m;
         row += gridDim.x * blockDim.x) {
        float c[BT];
        row_coefficients<BT, Fused>(sys, row, m, n, in, q, c);
        device_row_from(sys, row, threadIdx.x % 32, [&](index_t col, float w) {
#pragma unroll
            for (int b = 0; b < BT; ++b) atomicAdd(acc + b * n + col, c[b] * w);
        });
    }
    __syncthreads();
    // Staggered start per block: the blocks' adds to one address spread out.
    const index_t total = BT * n;
    const index_t start =
        static_cast<index_t>((static_cast<long long>(blockIdx.x) * total) / gridDim.x);
    for (index_t j0 = threadIdx.x; j0 < total; j0 += blockDim.x) {
        const index_t j = j0 + start < total ? j0 + start : j0 + start - total;
        const float v = acc[j];
        if (v != 0.0f) atomicAdd(out + j, v);
    }
}

}  // namespace recon::kernels::cuda
