// Regularizer stencils on the CPU: F(p, v) for each term, summed onto a base.

#include "kernels/backends.hpp"
#include "kernels/stencils.hpp"

namespace recon::kernels::cpu {

void regularizer_prepare(const Executor&, const RegularizerTerms& terms, ImageGrid grid,
                         int batch, View<const float> p, View<float> state)
{
    if (regularizer_state_size(terms, grid, batch) == 0) return;
    const size_type n = grid.size();
    for (int b = 0; b < batch; ++b) {
        const float* pb = p.data + b * n;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (index_t iy = 0; iy < grid.ny; ++iy) {
            for (index_t ix = 0; ix < grid.nx; ++ix) {
                terms_prepare(terms, state.data, batch, b, pb, grid, ix, iy);
            }
        }
    }
}

void regularizer_apply_add(const Executor&, const RegularizerTerms& terms, ImageGrid grid,
                           int batch, View<const float> state, View<const float> base,
                           View<const float> v, View<float> out)
{
    const size_type n = grid.size();
    for (int b = 0; b < batch; ++b) {
        const float* vb = v.data + b * n;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (index_t iy = 0; iy < grid.ny; ++iy) {
            for (index_t ix = 0; ix < grid.nx; ++ix) {
                const size_type i = b * n + iy * grid.nx + ix;
                const float b0 = base.data != nullptr ? base[i] : 0.0f;
                out[i] = b0 + terms_apply(terms, state.data, batch, b, vb, grid, ix, iy);
            }
        }
    }
}

}  // namespace recon::kernels::cpu
