// Regularizer stencils on the GPU: one thread per pixel and frame, the
// per-pixel formulas of stencils.hpp (the same code the CPU runs).

#include "kernels/backends.hpp"
#include "kernels/stencils.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int threads = 256;

/// State of every stateful term.
__global__ void prepare_kernel(RegularizerTerms terms, ImageGrid grid, int batch, const float* p,
                               float* state)
{
    const size_type n = grid.size();
    const int frame = blockIdx.y;
    const float* pb = p + frame * n;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_type>(gridDim.x) * blockDim.x) {
        const Pixel px = grid.pixel(static_cast<index_t>(i));
        terms_prepare(terms, state, batch, frame, pb, grid, px.ix, px.iy);
    }
}

__global__ void apply_add_kernel(RegularizerTerms terms, ImageGrid grid, int batch,
                                 const float* state, const float* base, const float* v,
                                 float* out)
{
    const size_type n = grid.size();
    const int frame = blockIdx.y;
    const float* vb = v + frame * n;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_type>(gridDim.x) * blockDim.x) {
        const Pixel px = grid.pixel(static_cast<index_t>(i));
        const float b0 = base != nullptr ? base[frame * n + i] : 0.0f;
        out[frame * n + i] = b0 + terms_apply(terms, state, batch, frame, vb, grid, px.ix, px.iy);
    }
}

dim3 pixel_grid(ImageGrid grid, int batch)
{
    return {blocks_for(grid.size(), threads, 64 * 1024), static_cast<unsigned>(batch)};
}

}  // namespace

void regularizer_prepare(const Executor& exec, const RegularizerTerms& terms, ImageGrid grid,
                         int batch, View<const float> p, View<float> state)
{
    if (regularizer_state_size(terms, grid, batch) == 0) return;
    prepare_kernel<<<pixel_grid(grid, batch), threads, 0, stream_of(exec)>>>(
        terms, grid, batch, p.data, state.data);
    RECON_CUDA_CHECK_LAUNCH();
}

void regularizer_apply_add(const Executor& exec, const RegularizerTerms& terms, ImageGrid grid,
                           int batch, View<const float> state, View<const float> base,
                           View<const float> v, View<float> out)
{
    apply_add_kernel<<<pixel_grid(grid, batch), threads, 0, stream_of(exec)>>>(
        terms, grid, batch, state.data, base.data, v.data, out.data);
    RECON_CUDA_CHECK_LAUNCH();
}

}  // namespace recon::kernels::cuda
