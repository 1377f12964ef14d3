// Elementwise updates and per-frame dot products on the CPU.

#include "kernels/backends.hpp"

namespace recon::kernels::cpu {

void axpby(const Executor&, float a, View<const float> x, float b, View<const float> y,
           View<float> out)
{
#pragma omp parallel for schedule(static) if (parallel_worthwhile(out.size))
    for (size_type i = 0; i < out.size; ++i) out[i] = a * x[i] + b * y[i];
}

void batched_dot(const Executor&, int batch, View<const float> x, View<const float> y,
                 View<double> out)
{
    const size_type len = x.size / batch;
    for (int b = 0; b < batch; ++b) {
        const float* xb = x.data + b * len;
        const float* yb = y.data + b * len;
        double sum = 0.0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (parallel_worthwhile(len))
        for (size_type i = 0; i < len; ++i) sum += static_cast<double>(xb[i]) * yb[i];
        out[b] = sum;
    }
}

void fill(const Executor&, View<float> out, float value)
{
#pragma omp parallel for schedule(static) if (parallel_worthwhile(out.size))
    for (size_type i = 0; i < out.size; ++i) out[i] = value;
}

}  // namespace recon::kernels::cpu
