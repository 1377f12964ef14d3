#pragma once
// Regularization terms as kernels see them. The image of each frame is
// [ny][nx] row-major (x fastest); gradients are forward differences with a
// Neumann boundary (the difference across the last column / row is 0).
//
//   tikhonov   F(p, v) = w v
//   laplacian  F(p, v) = w Dᵀ D v
//   tv         F(p, v) = w Dᵀ W(p) D v,  W(p)_i = 1 / sqrt(|(D p)_i|² + eps²)
//   nonneg     F(p, v) = w [p < 0] v
//   nonpos     F(p, v) = w [p > 0] v

#include <cstdint>

#include "kernels/common.hpp"

namespace recon::kernels {

enum class RegularizerKind : std::int32_t { tikhonov, laplacian, tv, nonneg, nonpos };

struct RegularizerTerm {
    RegularizerKind kind = RegularizerKind::tikhonov;
    float weight = 0.0f;
    float epsilon = 0.0f;  // tv only
};

/// A weighted sum of up to `max_terms` terms, passed by value into kernels.
struct RegularizerTerms {
    static constexpr int max_terms = 8;
    std::int32_t count = 0;
    RegularizerTerm term[max_terms] = {};
};

/// Column and row of a pixel.
struct Pixel {
    index_t ix, iy;
};

struct ImageGrid {
    index_t nx = 0;
    index_t ny = 0;
    RECON_HD index_t size() const { return nx * ny; }
    /// The column and row of pixel i ([ny][nx], x fastest); a 32-bit
    /// division, since size() fits index_t (64-bit division is a long
    /// subroutine on the GPU).
    RECON_HD Pixel pixel(index_t i) const
    {
        const index_t iy = i / nx;
        return {i - iy * nx, iy};
    }
};

/// A regularizer sum that a CGNR step computes in its own pass:
/// out = base + Σ_t F_t(p, v), with p's state from regularizer_prepare
/// (base.data null: no base).
struct RegularizerFold {
    RegularizerTerms terms;
    ImageGrid grid;
    View<const float> state;
    View<const float> base;
    View<const float> v;
};

/// The state a CGNR step computes in its own pass: regularizer_prepare's
/// work, every stateful term's state from p into `state`.
struct RegularizerPrepare {
    RegularizerTerms terms;
    ImageGrid grid;
    View<const float> p;
    View<float> state;
};

/// True for terms whose F depends on p (they keep per-pixel state computed
/// by regularizer_prepare: the TV diffusivity or the sign-constraint mask).
RECON_HD bool needs_state(RegularizerKind kind)
{
    return kind == RegularizerKind::tv || kind == RegularizerKind::nonneg ||
           kind == RegularizerKind::nonpos;
}

/// True for terms whose state at a pixel takes p's forward differences
/// there, not p alone (term_state: the TV diffusivity).
RECON_HD bool state_needs_gradient(RegularizerKind kind) { return kind == RegularizerKind::tv; }

/// Floats of state regularizer_prepare writes: one image per stateful term
/// and frame, laid out [term slot][frame][pixel].
inline size_type regularizer_state_size(const RegularizerTerms& terms, ImageGrid grid,
                                        int batch)
{
    size_type slots = 0;
    for (int t = 0; t < terms.count; ++t) slots += needs_state(terms.term[t].kind) ? 1 : 0;
    return slots * batch * grid.size();
}

}  // namespace recon::kernels
