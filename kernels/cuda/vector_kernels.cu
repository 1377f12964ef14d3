// Elementwise updates and per-frame dot products on the GPU.

#include "frame_reduce.cuh"
#include "kernels/backends.hpp"

namespace recon::kernels::cuda {
namespace {

constexpr int threads = 256;

__global__ void axpby_kernel(float a, const float* x, float b, const float* y, float* out,
                             size_type n)
{
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        out[i] = a * x[i] + b * y[i];
    }
}

__global__ void fill_kernel(float* out, size_type n, float value)
{
    const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        out[i] = value;
    }
}

struct DotOp {
    const float* x;
    const float* y;
    size_type len;
    double* out;

    __device__ bool active(int) const { return true; }
    __device__ double2 element(int frame, size_type i) const
    {
        const size_type k = frame * len + i;
        return {static_cast<double>(x[k]) * y[k], 0.0};
    }
    __device__ void finish(int frame, double s, double) const { out[frame] = s; }
};

}  // namespace

void axpby(const Executor& exec, float a, View<const float> x, float b, View<const float> y,
           View<float> out)
{
    if (out.size == 0) return;
    axpby_kernel<<<blocks_for(out.size, threads, 8 * 1024), threads, 0, stream_of(exec)>>>(
        a, x.data, b, y.data, out.data, out.size);
    RECON_CUDA_CHECK_LAUNCH();
}

void batched_dot(const Executor& exec, int batch, View<const float> x, View<const float> y,
                 View<double> out)
{
    const size_type len = x.size / batch;
    launch_frame_reduce(exec, batch, len, DotOp{x.data, y.data, len, out.data});
}

void fill(const Executor& exec, View<float> out, float value)
{
    if (out.size == 0) return;
    fill_kernel<<<blocks_for(out.size, threads, 8 * 1024), threads, 0, stream_of(exec)>>>(
        out.data, out.size, value);
    RECON_CUDA_CHECK_LAUNCH();
}

}  // namespace recon::kernels::cuda
