#pragma once
// Per-pixel regularizer formulas, shared by both backends (see
// regularizer_views.hpp for the maths). Images are [ny][nx], x fastest; a
// batch's frames lie one after another (frame-major, the solver's buffers)
// or interleaved pixel by pixel (the persistent kernel's shared memory).

#include <cmath>
#include <type_traits>

#include "kernels/common.hpp"
#include "kernels/regularizer_views.hpp"

namespace recon::kernels {

/// One frame's image whose pixels lie `stride` floats apart; p == nullptr
/// stands for "no image" (weighted_dtd's W = I).
struct StridedImage {
    const float* p;
    size_type stride;
    RECON_HD float operator[](size_type i) const { return p[i * stride]; }
};

/// Where pixel i of frame f of a batch lies: at f·frame + i·pixel, in each
/// of the stateful terms' slots of `image` floats.
struct BatchLayout {
    size_type image;
    size_type frame;
    size_type pixel;
    RECON_HD size_type at(int f, size_type i) const { return f * frame + i * pixel; }
    /// Frame f's image within the slot that starts at `slot`.
    RECON_HD StridedImage of(const float* slot, int f) const { return {slot + f * frame, pixel}; }
};

/// [frame][pixel]: the solver's buffers.
RECON_HD BatchLayout frame_major(int batch, size_type n) { return {batch * n, n, 1}; }
/// [pixel][frame], `frames` slots per pixel.
RECON_HD BatchLayout interleaved(int frames, size_type n) { return {frames * n, 1, frames}; }

/// Forward differences with a Neumann boundary at pixel (ix, iy).
RECON_HD void forward_gradient(StridedImage v, ImageGrid g, index_t ix, index_t iy,
                               float& gx, float& gy)
{
    const index_t i = iy * g.nx + ix;
    gx = ix + 1 < g.nx ? v[i + 1] - v[i] : 0.0f;
    gy = iy + 1 < g.ny ? v[i + g.nx] - v[i] : 0.0f;
}

/// (Dᵀ W D v) at pixel (ix, iy), W = diag(w); w.p == nullptr means W = I:
/// −w_i (gx + gy) at the pixel, plus w of the left neighbour times its gx
/// and w of the upper neighbour times its gy (forward differences, Neumann
/// boundary). Every value is loaded before any is used, so that the loads
/// can be in flight together: the GPU's one-pass step runs this per pixel
/// between its view loop and its grid sync, where loads behind each
/// boundary test had waited on the ones before (ct_256 with TV −0.6 %).
RECON_HD float weighted_dtd(StridedImage v, StridedImage w, ImageGrid g, index_t ix,
                            index_t iy)
{
    const index_t i = iy * g.nx + ix;
    const bool left = ix > 0, up = iy > 0;
    float gx, gy;
    forward_gradient(v, g, ix, iy, gx, gy);
    const float here = v[i];
    const float v_left = left ? v[i - 1] : 0.0f;
    const float v_up = up ? v[i - g.nx] : 0.0f;
    const float w_here = w.p ? w[i] : 1.0f;
    const float w_left = w.p && left ? w[i - 1] : 1.0f;
    const float w_up = w.p && up ? w[i - g.nx] : 1.0f;
    // the left neighbour's gx and the upper one's gy: forward_gradient's
    // operations there
    float sum = -w_here * (gx + gy);
    if (left) sum += w_left * (here - v_left);
    if (up) sum += w_up * (here - v_up);
    return sum;
}

/// The state a stateful term of kind Kind keeps at a pixel where p is
/// `here` and p's forward differences are (gx, gy) (forward_gradient): the
/// TV diffusivity 1/sqrt(|Dp|² + eps²), or the sign-constraint weight.
template <RegularizerKind Kind>
RECON_HD float term_state_as(const RegularizerTerm& t, float here, float gx, float gy)
{
    if constexpr (Kind == RegularizerKind::tv) {
        return 1.0f / sqrtf(gx * gx + gy * gy + t.epsilon * t.epsilon);
    } else if constexpr (Kind == RegularizerKind::nonneg) {
        return here < 0.0f ? 1.0f : 0.0f;
    } else if constexpr (Kind == RegularizerKind::nonpos) {
        return here > 0.0f ? 1.0f : 0.0f;
    } else {
        return 0.0f;
    }
}

/// term_state_as for the term's own kind.
RECON_HD float term_state(const RegularizerTerm& t, float here, float gx, float gy)
{
    switch (t.kind) {
    case RegularizerKind::tv: return term_state_as<RegularizerKind::tv>(t, here, gx, gy);
    case RegularizerKind::nonneg: return term_state_as<RegularizerKind::nonneg>(t, here, gx, gy);
    case RegularizerKind::nonpos: return term_state_as<RegularizerKind::nonpos>(t, here, gx, gy);
    default: return 0.0f;
    }
}

/// F_t(p, v) at pixel (ix, iy) for a term of kind Kind; `state` is this
/// term's state image of the frame (unused by stateless terms).
template <RegularizerKind Kind>
RECON_HD float term_apply_as(const RegularizerTerm& t, StridedImage state, StridedImage v,
                             ImageGrid g, index_t ix, index_t iy)
{
    const index_t i = iy * g.nx + ix;
    if constexpr (Kind == RegularizerKind::tikhonov) {
        return t.weight * v[i];
    } else if constexpr (Kind == RegularizerKind::laplacian) {
        return t.weight * weighted_dtd(v, {nullptr, 0}, g, ix, iy);
    } else if constexpr (Kind == RegularizerKind::tv) {
        return t.weight * weighted_dtd(v, state, g, ix, iy);
    } else {  // nonneg, nonpos
        return t.weight * state[i] * v[i];
    }
}

/// term_apply_as for the term's own kind.
RECON_HD float term_apply(const RegularizerTerm& t, StridedImage state, StridedImage v,
                          ImageGrid g, index_t ix, index_t iy)
{
    using K = RegularizerKind;
    switch (t.kind) {
    case K::tikhonov: return term_apply_as<K::tikhonov>(t, state, v, g, ix, iy);
    case K::laplacian: return term_apply_as<K::laplacian>(t, state, v, g, ix, iy);
    case K::tv: return term_apply_as<K::tv>(t, state, v, g, ix, iy);
    case K::nonneg: return term_apply_as<K::nonneg>(t, state, v, g, ix, iy);
    case K::nonpos: return term_apply_as<K::nonpos>(t, state, v, g, ix, iy);
    }
    return 0.0f;
}

// One term, the usual configuration, takes a path of its own below with
// the loop's operations by a fixed index: in a kernel a loop over a count
// known only at run time indexes the kernel's parameters (the terms)
// dynamically, and those loads waited on the constant cache in every
// iteration's step (ct_256 with TV, one term: −0.1 ms a solve). A kernel
// may also be compiled for one term of a given kind (Shape OneTerm<Kind>;
// AnyTerms: whatever the terms say at run time), without the other kinds'
// code and tests.

/// The terms a kernel is compiled for: any count and kinds.
struct AnyTerms {};
/// Exactly one term, of kind Kind (the caller has checked).
template <RegularizerKind Kind>
struct OneTerm {
    static constexpr RegularizerKind kind = Kind;
};
template <class Shape>
constexpr bool is_one_term = !std::is_same_v<Shape, AnyTerms>;

/// Whether the terms take the one-term path: always for OneTerm (the rest
/// is not compiled in), else where there is one term.
template <class Shape>
RECON_HD bool takes_one_term(const RegularizerTerms& terms)
{
    return is_one_term<Shape> || terms.count == 1;
}

/// Term 0's kind, fixed when compiling for OneTerm.
template <class Shape>
RECON_HD RegularizerKind first_term_kind(const RegularizerTerms& terms)
{
    if constexpr (is_one_term<Shape>) {
        return Shape::kind;
    } else {
        return terms.term[0].kind;
    }
}

/// term_state of term 0, its kind fixed when compiling for OneTerm.
template <class Shape>
RECON_HD float first_term_state(const RegularizerTerms& terms, float here, float gx, float gy)
{
    if constexpr (is_one_term<Shape>) {
        return term_state_as<Shape::kind>(terms.term[0], here, gx, gy);
    } else {
        return term_state(terms.term[0], here, gx, gy);
    }
}

/// term_apply of term 0, its kind fixed when compiling for OneTerm.
template <class Shape>
RECON_HD float first_term_apply(const RegularizerTerms& terms, StridedImage state, StridedImage v,
                                ImageGrid g, index_t ix, index_t iy)
{
    if constexpr (is_one_term<Shape>) {
        return term_apply_as<Shape::kind>(terms.term[0], state, v, g, ix, iy);
    } else {
        return term_apply(terms.term[0], state, v, g, ix, iy);
    }
}

/// Whether any term's state takes p's forward differences.
template <class Shape = AnyTerms>
RECON_HD bool terms_need_gradient(const RegularizerTerms& terms)
{
    if (takes_one_term<Shape>(terms)) return state_needs_gradient(first_term_kind<Shape>(terms));
    bool any = false;
    for (int t = 0; t < terms.count; ++t) any |= state_needs_gradient(terms.term[t].kind);
    return any;
}

/// Every stateful term's state at one pixel, from p there (`here`) and p's
/// forward differences there: slot s at state[s · slots + at].
template <class Shape = AnyTerms>
RECON_HD void terms_prepare_at(const RegularizerTerms& terms, float* state, size_type slots,
                               size_type at, float here, float gx, float gy)
{
    if (takes_one_term<Shape>(terms)) {
        if (needs_state(first_term_kind<Shape>(terms))) {
            state[at] = first_term_state<Shape>(terms, here, gx, gy);
        }
        return;
    }
    size_type slot = 0;
    for (int t = 0; t < terms.count; ++t) {
        const RegularizerTerm& term = terms.term[t];
        if (!needs_state(term.kind)) continue;
        state[slot++ * slots + at] = term_state(term, here, gx, gy);
    }
}

/// regularizer_prepare at pixel (ix, iy) of frame `frame`: every stateful
/// term's state from p (the frame's image), into `state` (one slot per
/// stateful term, laid out as `layout`).
RECON_HD void terms_prepare(const RegularizerTerms& terms, float* state, BatchLayout layout,
                            int frame, StridedImage p, ImageGrid g, index_t ix, index_t iy)
{
    const size_type i = static_cast<size_type>(iy) * g.nx + ix;
    // The neighbours only where a term's state takes them (a sign
    // constraint alone reads p at the pixel): this runs in every
    // iteration's step.
    float gx = 0.0f, gy = 0.0f;
    if (terms_need_gradient(terms)) forward_gradient(p, g, ix, iy, gx, gy);
    terms_prepare_at(terms, state, layout.image, layout.at(frame, i), p[i], gx, gy);
}

/// The state image a term of kind `kind` reads: frame `frame` of the slot
/// at `slot`, or none for a stateless term.
RECON_HD StridedImage term_state_image(RegularizerKind kind, const float* slot,
                                       BatchLayout layout, int frame)
{
    return needs_state(kind) ? layout.of(slot, frame) : StridedImage{nullptr, 0};
}

/// Σ_t F_t(p, v) at pixel (ix, iy) of frame `frame`: `state` holds every
/// stateful term's slot as terms_prepare wrote it, `v` is the frame's image.
template <class Shape = AnyTerms>
RECON_HD float terms_apply(const RegularizerTerms& terms, const float* state, BatchLayout layout,
                           int frame, StridedImage v, ImageGrid g, index_t ix, index_t iy)
{
    if (takes_one_term<Shape>(terms)) {  // the loop's operations: 0 + F
        const StridedImage own =
            term_state_image(first_term_kind<Shape>(terms), state, layout, frame);
        return 0.0f + first_term_apply<Shape>(terms, own, v, g, ix, iy);
    }
    float sum = 0.0f;
    size_type slot = 0;
    for (int t = 0; t < terms.count; ++t) {
        const RegularizerTerm& term = terms.term[t];
        const StridedImage sb =
            term_state_image(term.kind, state + slot * layout.image, layout, frame);
        if (needs_state(term.kind)) ++slot;
        sum += term_apply(term, sb, v, g, ix, iy);
    }
    return sum;
}

/// The same for frame-major buffers ([slot][frame][pixel] state, `p` and
/// `v` the frame's contiguous image).
RECON_HD void terms_prepare(const RegularizerTerms& terms, float* state, int batch, int frame,
                            const float* p, ImageGrid g, index_t ix, index_t iy)
{
    terms_prepare(terms, state, frame_major(batch, g.size()), frame, StridedImage{p, 1}, g, ix,
                  iy);
}

template <class Shape = AnyTerms>
RECON_HD float terms_apply(const RegularizerTerms& terms, const float* state, int batch,
                           int frame, const float* v, ImageGrid g, index_t ix, index_t iy)
{
    return terms_apply<Shape>(terms, state, frame_major(batch, g.size()), frame,
                              StridedImage{v, 1}, g, ix, iy);
}

}  // namespace recon::kernels
