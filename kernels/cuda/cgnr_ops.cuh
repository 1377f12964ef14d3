#pragma once
// Per-element pieces of the CGNR steps that more than one kernel runs: the
// step kernels of cgnr_kernels.cu walk the image for them, and a product
// kernel may run one in its epilogue on the values it has just made (the
// parallel-beam adjoint sums the dot step where u is formed).

#include "kernels/backends.hpp"
#include "kernels/cgnr_scalars.hpp"
#include "kernels/stencils.hpp"

namespace recon::kernels::cuda {

__device__ __forceinline__ bool running(const CgnrScalars* s, int frame)
{
    return s[frame].status == SolveStatus::running;
}

/// d_{k+1} = −g + β d_k at one element: every kernel that moves d (or a
/// copy of it) forms it with these operations, so copies agree bit for bit.
__device__ __forceinline__ float direction_at(float g, float beta, float d)
{
    return fmaf(beta, d, -g);
}

/// What the fused form's one-pass update reads at element k (none of it
/// depends on α, so a kernel may load it while α is being formed).
struct UpdateOperands {
    float d, u, e, fx, x, h;
};

__device__ __forceinline__ UpdateOperands load_update(size_type k, const float* d, const float* u,
                                                      const float* e, const float* fx,
                                                      const float* x, const float* h)
{
    return {d[k], u[k], e[k], fx != nullptr ? fx[k] : 0.0f, x[k], h[k]};
}

/// x_{k+1} = x_k + α d_k at one element: a kernel that forms a neighbour's
/// new x itself (for its state) takes the same operations as the owner.
__device__ __forceinline__ float stepped_x(float x, float alpha, float d)
{
    return fmaf(alpha, d, x);
}

/// The fused form's one-pass update at element k with the frame's α, from
/// its operands: x += α d; h_{k+1} = h_k + α u; g = h_k + fx + α e with fx,
/// else g = h_{k+1} (stored apart only where g is not h). Returns g.
__device__ __forceinline__ float update_from(const UpdateOperands& o, size_type k, float alpha,
                                             bool with_fx, float* x, float* h, float* g)
{
    x[k] = stepped_x(o.x, alpha, o.d);
    const float hn = o.h + alpha * o.u;
    h[k] = hn;
    if (with_fx) {
        const float gk = o.h + o.fx + alpha * o.e;
        g[k] = gk;
        return gk;
    }
    if (g != h) g[k] = hn;
    return hn;
}

__device__ __forceinline__ float update_at(size_type k, float alpha, const float* d,
                                           const float* u, const float* e, const float* fx,
                                           float* x, float* h, float* g)
{
    return update_from(load_update(k, d, u, e, fx, x, h), k, alpha, fx != nullptr, x, h, g);
}

/// base + Σ F(p, fold.v) at element i of a frame, for a given base value
/// (Shape: the terms the kernel is compiled for, stencils.hpp).
template <class Shape = AnyTerms>
__device__ __forceinline__ float fold_at(const RegularizerFold& fold, int batch, int frame,
                                         size_type i, float base)
{
    const size_type n = fold.grid.size();
    const Pixel px = fold.grid.pixel(static_cast<index_t>(i));
    return base + terms_apply<Shape>(fold.terms, fold.state.data, batch, frame,
                                     fold.v.data + frame * n, fold.grid, px.ix, px.iy);
}

/// out = fold.base + Σ F(p, fold.v) at element i of a frame (no base: 0).
template <class Shape = AnyTerms>
__device__ __forceinline__ float fold_at(const RegularizerFold& fold, int batch, int frame,
                                         size_type i)
{
    const float base =
        fold.base.data != nullptr ? fold.base.data[frame * fold.grid.size() + i] : 0.0f;
    return fold_at<Shape>(fold, batch, frame, i, base);
}

/// The dot step at element i of a frame, given u_i = (Aᵀ A d)_i. With a
/// regularizer (e not null): e = u + Σ F(x_k, d) is written and, with fx,
/// fx = Σ F(x_k, x_k) (aside: it needs no u, so a kernel may give it to
/// other threads); without, e is u. at returns the terms of f = dᵀe and
/// gd = gᵀd; finish stores them for running frames.
struct StepDotsAt {
    RegularizerFold fold;  // F(x_k, d): its base is u, given per element
    RegularizerFold at_x;  // F(x_k, x_k), no base
    int batch;
    const float* d;
    const float* g;
    float* e;
    float* fx;
    size_type n;
    CgnrScalars* s;

    __device__ __forceinline__ double2 at(int frame, size_type i, float u) const
    {
        const size_type k = frame * n + i;
        float ei = u;
        if (e != nullptr) {
            ei = fold_at(fold, batch, frame, i, u);
            e[k] = ei;
        }
        const double di = d[k];
        return {di * ei, static_cast<double>(g[k]) * di};
    }
    __device__ __forceinline__ void aside(int frame, size_type i) const
    {
        if (e != nullptr && fx != nullptr) fx[frame * n + i] = fold_at(at_x, batch, frame, i);
    }
    __device__ void finish(int frame, double f, double gd) const
    {
        if (!running(s, frame)) return;
        s[frame].f = f;
        s[frame].gd = gd;
    }
};

}  // namespace recon::kernels::cuda
