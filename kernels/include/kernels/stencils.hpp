#pragma once
// Per-pixel regularizer formulas, shared by both backends (see
// regularizer_views.hpp for the maths). Images are [ny][nx], x fastest.

#include <cmath>

#include "kernels/common.hpp"
#include "kernels/regularizer_views.hpp"

namespace recon::kernels {

/// Forward differences with a Neumann boundary at pixel (ix, iy).
RECON_HD void forward_gradient(const float* v, ImageGrid g, index_t ix, index_t iy,
                               float& gx, float& gy)
{
    const index_t i = iy * g.nx + ix;
    gx = ix + 1 < g.nx ? v[i + 1] - v[i] : 0.0f;
    gy = iy + 1 < g.ny ? v[i + g.nx] - v[i] : 0.0f;
}

/// (Dᵀ W D v) at pixel (ix, iy), W = diag(w); w == nullptr means W = I.
RECON_HD float weighted_dtd(const float* v, const float* w, ImageGrid g, index_t ix,
                            index_t iy)
{
    const index_t i = iy * g.nx + ix;
    float gx, gy;
    forward_gradient(v, g, ix, iy, gx, gy);
    const float wi = w ? w[i] : 1.0f;
    float sum = -wi * (gx + gy);
    if (ix > 0) {
        float gxl, gyl;
        forward_gradient(v, g, ix - 1, iy, gxl, gyl);
        sum += (w ? w[i - 1] : 1.0f) * gxl;
    }
    if (iy > 0) {
        float gxu, gyu;
        forward_gradient(v, g, ix, iy - 1, gxu, gyu);
        sum += (w ? w[i - g.nx] : 1.0f) * gyu;
    }
    return sum;
}

/// The state a stateful term keeps for pixel (ix, iy) of p: the TV
/// diffusivity 1/sqrt(|Dp|² + eps²), or the sign-constraint weight.
RECON_HD float term_state(const RegularizerTerm& t, const float* p, ImageGrid g, index_t ix,
                          index_t iy)
{
    const index_t i = iy * g.nx + ix;
    switch (t.kind) {
    case RegularizerKind::tv: {
        float gx, gy;
        forward_gradient(p, g, ix, iy, gx, gy);
        return 1.0f / sqrtf(gx * gx + gy * gy + t.epsilon * t.epsilon);
    }
    case RegularizerKind::nonneg: return p[i] < 0.0f ? 1.0f : 0.0f;
    case RegularizerKind::nonpos: return p[i] > 0.0f ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/// F_t(p, v) at pixel (ix, iy); `state` is this term's state image of the
/// frame (unused by stateless terms).
RECON_HD float term_apply(const RegularizerTerm& t, const float* state, const float* v,
                          ImageGrid g, index_t ix, index_t iy)
{
    const index_t i = iy * g.nx + ix;
    switch (t.kind) {
    case RegularizerKind::tikhonov: return t.weight * v[i];
    case RegularizerKind::laplacian: return t.weight * weighted_dtd(v, nullptr, g, ix, iy);
    case RegularizerKind::tv: return t.weight * weighted_dtd(v, state, g, ix, iy);
    case RegularizerKind::nonneg:
    case RegularizerKind::nonpos: return t.weight * state[i] * v[i];
    }
    return 0.0f;
}

/// Σ_t F_t(p, v) at pixel (ix, iy) of frame `frame`: `state` holds every
/// stateful term's images in regularizer_prepare's layout ([slot][frame][pixel])
/// and `v` is the frame's image.
/// regularizer_prepare at pixel (ix, iy) of frame `frame`: every stateful
/// term's state from p (the frame's image), into `state` ([slot][frame][pixel]).
RECON_HD void terms_prepare(const RegularizerTerms& terms, float* state, int batch, int frame,
                            const float* p, ImageGrid g, index_t ix, index_t iy)
{
    const size_type n = g.size();
    const size_type i = static_cast<size_type>(iy) * g.nx + ix;
    size_type slot = 0;
    for (int t = 0; t < terms.count; ++t) {
        const RegularizerTerm& term = terms.term[t];
        if (!needs_state(term.kind)) continue;
        state[(slot++ * batch + frame) * n + i] = term_state(term, p, g, ix, iy);
    }
}

RECON_HD float terms_apply(const RegularizerTerms& terms, const float* state, int batch,
                           int frame, const float* v, ImageGrid g, index_t ix, index_t iy)
{
    const size_type n = g.size();
    float sum = 0.0f;
    size_type slot = 0;
    for (int t = 0; t < terms.count; ++t) {
        const RegularizerTerm& term = terms.term[t];
        const float* sb = needs_state(term.kind) ? state + (slot++ * batch + frame) * n : nullptr;
        sum += term_apply(term, sb, v, g, ix, iy);
    }
    return sum;
}

}  // namespace recon::kernels
