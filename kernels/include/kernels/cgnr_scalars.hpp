#pragma once
// The scalar part of each CGNR step (DESIGN §3), shared by both backends so
// that the guards and stop tests are identical on CPU and GPU.

#include <cmath>

#include "kernels/common.hpp"
#include "kernels/solver_state.hpp"

namespace recon::kernels {

/// After g0: gg = ‖g0‖², and gg0 = ‖Aᵀb‖² (the gradient's norm at x = 0),
/// the reference of the relative tolerance — not ‖g0‖, which a warm start
/// makes small, so that a warm-started frame would have to shrink an
/// already small gradient by the same factor again.
RECON_HD void cgnr_scalars_begin(CgnrScalars& s, const CgnrParams& p, double gg, double gg_ref)
{
    s.gg0 = gg_ref > 0.0 ? gg_ref : gg;
    s.gg = gg;
    s.iterations = 0;
    s.alpha = 0;
    s.beta = 0;
    if (!is_finite(gg) || !is_finite(s.gg0)) {
        s.status = SolveStatus::non_finite;
    } else if (gg == 0.0) {
        s.status = SolveStatus::converged;
    } else if (p.max_iterations <= 0) {
        s.status = SolveStatus::max_iterations;
    } else {
        s.status = SolveStatus::running;
    }
}

/// α = -(gᵀd) / (dᵀe), guarded: returns false (and sets the status) when the
/// step cannot be taken.
RECON_HD bool cgnr_scalars_alpha(CgnrScalars& s)
{
    if (!is_finite(s.f) || !is_finite(s.gd)) {
        s.status = SolveStatus::non_finite;
        return false;
    }
    if (s.f <= 0.0) {
        s.status = SolveStatus::breakdown;
        return false;
    }
    s.alpha = -s.gd / s.f;
    return true;
}

/// β = (g_{k+1}ᵀ e_k) / f_k, the iteration count, and the stop tests.
RECON_HD void cgnr_scalars_end(CgnrScalars& s, const CgnrParams& p, double ge, double gg)
{
    s.ge = ge;
    s.gg = gg;
    s.beta = ge / s.f;
    s.iterations += 1;
    if (!is_finite(gg) || !is_finite(s.beta)) {
        s.status = SolveStatus::non_finite;
    } else if (gg <= p.tolerance * p.tolerance * s.gg0) {
        s.status = SolveStatus::converged;
    } else if (s.iterations >= p.max_iterations) {
        s.status = SolveStatus::max_iterations;
    }
}

/// How much of its terms an expanded sum must keep (below: cancellation).
/// The expansion is exact for the vectors before rounding; the stored
/// g_{k+1} differs from them by float rounding, ~6e-8 of its entries, so a
/// sum that keeps 2^-10 of its terms is within ~1e-4 of the one over the
/// stored vector in the worst case (and typically far closer).
inline constexpr double cgnr_expansion_keep = 1.0 / 1024.0;

/// cgnr_scalars_end from sums taken before the step, for the fused form
/// without a regularizer (g = h, e = u): with g_{k+1} = h_k + α u_k,
///   g_{k+1}ᵀ e_k = hᵀu + α uᵀu,   ‖g_{k+1}‖² = hᵀh + 2α hᵀu + α² uᵀu,
/// so one reduction over the elements serves both α and β. `step` is the α
/// the elements take (α rounded to float). Returns false and changes
/// nothing when either value keeps less than cgnr_expansion_keep of its
/// terms (or a term is not finite): then sum them over the new vectors.
RECON_HD bool cgnr_scalars_end_expanded(CgnrScalars& s, const CgnrParams& p, double step,
                                        double hu, double uu, double hh)
{
    const double ge = hu + step * uu;
    const double gg = hh + step * (2.0 * hu + step * uu);
    const double ge_terms = (hu < 0 ? -hu : hu) + (step * uu < 0 ? -step * uu : step * uu);
    const bool kept = gg >= cgnr_expansion_keep * hh &&
                      (ge < 0 ? -ge : ge) >= cgnr_expansion_keep * ge_terms;
    if (!kept || !is_finite(gg) || !is_finite(ge)) return false;
    cgnr_scalars_end(s, p, ge, gg);
    return true;
}

}  // namespace recon::kernels
