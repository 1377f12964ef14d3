#pragma once
// Kernels over the rows of A for every system model: A x (one thread per
// row, gathers), Aᵀ y and the fused Aᵀ(A d) (one thread per row, scatters
// into global atomics or into a per-block shared-memory image), and the
// pixel-driven, exactly matched Aᵀ y of the parallel-beam model. BT frames
// share each pass over a row; BT is a compile-time constant so that the
// per-frame sums live in registers.

#include <cuda_runtime.h>

#include "kernels/rows.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda {

// --- row generators for the device ----------------------------------------------

/// Stored and parallel-beam rows: the shared generators of rows.hpp.
template <class System, class F>
__device__ __forceinline__ void device_row(const System& v, index_t row, F&& f)
{
    for_each_entry(v, row, f);
}

/// Synthetic rows: the same integers and weights as rows.hpp's generator,
/// computed with 32-bit division where the operands fit (64-bit division is
/// a long subroutine on the GPU, and the result is the same integer).
template <class F>
__device__ __forceinline__ void device_row(const SyntheticView& v, index_t row, F&& f)
{
    const index_t length = synthetic_row_length(v, row);
    if (length <= 0) return;
    const bool narrow = static_cast<unsigned long long>(v.cols) * length < (1ull << 32);
    unsigned lo = 0;
    for (index_t j = 0; j < length; ++j) {
        const std::uint64_t h = hash64(v.seed, static_cast<std::uint64_t>(row),
                                       static_cast<std::uint64_t>(j));
        const unsigned hi =
            narrow ? static_cast<unsigned>(j + 1) * static_cast<unsigned>(v.cols) /
                         static_cast<unsigned>(length)
                   : static_cast<unsigned>(static_cast<std::uint64_t>(j + 1) * v.cols /
                                           static_cast<std::uint64_t>(length));
        const unsigned low32 = static_cast<unsigned>(h & 0xFFFFFFFFull);
        const index_t col = static_cast<index_t>(lo + low32 % (hi - lo));
        f(col, 0.05f + 0.95f * unit_float(h));
        lo = hi;
    }
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

/// A x for parallel2d, one warp per ray: the lanes take every 32nd step
/// along the major axis (the same weights as rows.hpp's generator) and the
/// warp sums them, so the steps' loads are in flight together. With `sub`,
/// r = A x − b with the sum kept in Acc.
template <int BT, class Acc>
__global__ void parallel2d_apply_kernel(Parallel2dView v, const float* __restrict__ x,
                                        const float* __restrict__ sub, float* __restrict__ y)
{
    const int lane = threadIdx.x % 32;
    const index_t m = v.views * v.bins;
    const index_t n = v.nx * v.ny;
    const index_t warps = gridDim.x * (blockDim.x / 32);
    for (index_t row = (blockIdx.x * blockDim.x + threadIdx.x) / 32; row < m; row += warps) {
        const index_t view = row / v.bins;
        const index_t bin = row - view * v.bins;
        const float c = v.cos_angle[view];
        const float s = v.sin_angle[view];
        const float t =
            static_cast<float>(bin) - 0.5f * static_cast<float>(v.bins - 1) - v.center_offset;
        const float cx = 0.5f * static_cast<float>(v.nx - 1);
        const float cy = 0.5f * static_cast<float>(v.ny - 1);
        const bool step_y = fabsf(c) >= fabsf(s);
        const index_t n_major = step_y ? v.ny : v.nx;
        const index_t n_minor = step_y ? v.nx : v.ny;
        const float inv = 1.0f / (step_y ? c : s);
        const float scale = fabsf(inv);
        const float slope = -(step_y ? s : c) * inv;
        const float base = t * inv - slope * (step_y ? cy : cx) + (step_y ? cx : cy);
        Acc acc[BT];
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[b] = Acc{0};
        for (index_t k = lane; k < n_major; k += 32) {
            const float p = base + slope * static_cast<float>(k);
            if (!(p > -1.0f && p < static_cast<float>(n_minor))) continue;
            const float pf = floorf(p);
            const index_t i0 = static_cast<index_t>(pf);
            const float w1 = p - pf;
            const float w0 = 1.0f - w1;
            if (i0 >= 0 && w0 != 0.0f) {
                const index_t col = step_y ? k * v.nx + i0 : i0 * v.nx + k;
#pragma unroll
                for (int b = 0; b < BT; ++b) {
                    acc[b] += static_cast<Acc>(w0 * scale) * __ldg(x + static_cast<size_type>(b) * n + col);
                }
            }
            if (i0 + 1 < n_minor && w1 != 0.0f) {
                const index_t col = step_y ? k * v.nx + i0 + 1 : (i0 + 1) * v.nx + k;
#pragma unroll
                for (int b = 0; b < BT; ++b) {
                    acc[b] += static_cast<Acc>(w1 * scale) * __ldg(x + static_cast<size_type>(b) * n + col);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < BT; ++b) {
            for (int o = 16; o > 0; o /= 2) acc[b] += __shfl_down_sync(0xffffffffu, acc[b], o);
        }
        if (lane == 0) {
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                const size_type k = static_cast<size_type>(b) * m + row;
                y[k] = static_cast<float>(sub != nullptr ? acc[b] - __ldg(sub + k) : acc[b]);
            }
        }
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

// --- Aᵀ y for parallel2d, pixel-driven ------------------------------------------

/// Joseph's ray for (view, bin) as rows.hpp generates it: the minor-axis
/// crossing at major index k is p = base + slope * k.
struct JosephRay {
    bool step_y;
    float inv, scale, slope, c_major, c_minor;
};

__device__ __forceinline__ JosephRay joseph_view(const Parallel2dView& v, index_t view)
{
    JosephRay r;
    const float c = v.cos_angle[view];
    const float s = v.sin_angle[view];
    r.step_y = fabsf(c) >= fabsf(s);
    r.inv = 1.0f / (r.step_y ? c : s);
    r.scale = fabsf(r.inv);
    r.slope = -(r.step_y ? s : c) * r.inv;
    const float cx = 0.5f * static_cast<float>(v.nx - 1);
    const float cy = 0.5f * static_cast<float>(v.ny - 1);
    r.c_major = r.step_y ? cy : cx;
    r.c_minor = r.step_y ? cx : cy;
    return r;
}

/// Per-view constants of the pixel-driven adjoint, kept in shared memory.
struct ViewConstants {
    float inv, scale, slope, offset;  // offset = c_minor − slope · c_major
    float cos_or_sin;                 // 1 / inv
    int step_y;
};

constexpr int adjoint_view_chunk = 256;

constexpr int adjoint_groups = 8;  // view groups per block: blockDim = 32 x 8

/// x[b][pixel] = Σ_rows A_row,pixel y[b][row], gathering for each pixel the
/// few bins per view whose ray touches it, with the weights the row
/// generator gives (so this is the adjoint of A x, without atomics). A block
/// takes 32 neighbouring pixels (one per lane: their bins are neighbours
/// too); its 8 warps split the views and their sums meet in shared memory.
template <int BT>
__global__ void __launch_bounds__(256) parallel2d_adjoint_kernel(Parallel2dView v,
                                                                 const float* __restrict__ y,
                                                                 float* __restrict__ x)
{
    __shared__ ViewConstants table[adjoint_view_chunk];
    __shared__ float partial[adjoint_groups][BT][32];
    const int lane = threadIdx.x % 32;
    const int group = threadIdx.x / 32;
    const index_t n = v.nx * v.ny;
    const index_t m = v.views * v.bins;
    const float half = 0.5f * static_cast<float>(v.bins - 1);
    // Block-uniform trip count: the barriers below need every thread.
    for (index_t first = blockIdx.x * 32; first < n; first += gridDim.x * 32) {
        const index_t pixel = first + lane;
        const bool valid = pixel < n;
        const index_t iy = valid ? pixel / v.nx : 0;
        const index_t ix = valid ? pixel - iy * v.nx : 0;
        float acc[BT];
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[b] = 0.0f;
        for (index_t chunk = 0; chunk < v.views; chunk += adjoint_view_chunk) {
            const index_t count = min(adjoint_view_chunk, v.views - chunk);
            __syncthreads();
            for (index_t t = threadIdx.x; t < count; t += blockDim.x) {
                const JosephRay r = joseph_view(v, chunk + t);
                table[t] = {r.inv, r.scale, r.slope, r.c_minor - r.slope * r.c_major,
                            r.step_y ? v.cos_angle[chunk + t] : v.sin_angle[chunk + t],
                            r.step_y ? 1 : 0};
            }
            __syncthreads();
            if (!valid) continue;
            for (index_t t = group; t < count; t += adjoint_groups) {
                const ViewConstants c = table[t];
                const index_t k = c.step_y ? iy : ix;
                const index_t j = c.step_y ? ix : iy;
                const index_t n_minor = c.step_y ? v.nx : v.ny;
                const float kf = static_cast<float>(k);
                // p(bin) ≈ inv · bin + p0; the pixel is touched for p in [j−1, j+1).
                const float p0 = (-half - v.center_offset) * c.inv + c.offset + c.slope * kf;
                const float lo_f = (static_cast<float>(j - 1) - p0) * c.cos_or_sin;
                const float hi_f = (static_cast<float>(j + 1) - p0) * c.cos_or_sin;
                const index_t lo = max(0, static_cast<index_t>(floorf(fminf(lo_f, hi_f))));
                const index_t hi = min(v.bins - 1, static_cast<index_t>(ceilf(fmaxf(lo_f, hi_f))));
                const index_t row0 = (chunk + t) * v.bins;
                for (index_t bin = lo; bin <= hi; ++bin) {
                    const float tb = static_cast<float>(bin) - half - v.center_offset;
                    const float p = tb * c.inv + c.offset + c.slope * kf;
                    if (!(p > -1.0f && p < static_cast<float>(n_minor))) continue;
                    const float pf = floorf(p);
                    const index_t i0 = static_cast<index_t>(pf);
                    const float frac = p - pf;
                    float w;
                    if (i0 == j) {
                        w = (1.0f - frac) * c.scale;
                    } else if (i0 + 1 == j) {
                        w = frac * c.scale;
                    } else {
                        continue;
                    }
#pragma unroll
                    for (int b = 0; b < BT; ++b) {
                        acc[b] += w * __ldg(y + static_cast<size_type>(b) * m + row0 + bin);
                    }
                }
            }
        }
#pragma unroll
        for (int b = 0; b < BT; ++b) partial[group][b][lane] = acc[b];
        __syncthreads();
        if (group == 0 && valid) {
#pragma unroll
            for (int b = 0; b < BT; ++b) {
                float sum = 0.0f;
                for (int g = 0; g < adjoint_groups; ++g) sum += partial[g][b][lane];
                x[static_cast<size_type>(b) * n + pixel] = sum;
            }
        }
    }
}

}  // namespace recon::kernels::cuda
