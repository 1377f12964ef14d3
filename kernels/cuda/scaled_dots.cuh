#pragma once
// A thread's share of dot products of float vectors, summed in float after
// scaling each vector by a power of two, then taken to double exactly for
// the block's sums in double.
//
// Why: float products of unscaled values leave float's range (small
// gradients' squares underflowed: history v5 in docs/gpu-performance.md),
// and products taken in double cost each operand a conversion, with the
// double accumulators twice the registers of float ones. With the largest
// |v| of the thread's values brought to [1, 2), a product of two scaled
// values lies in [0, 4), and a term is lost only where it is below 2^-126
// of the largest product: ~38 orders of magnitude under the float rounding
// of the others.

namespace recon::kernels::cuda {

/// The power of two that scales a thread's values: 2^(127 − exponent),
/// with exponent the biased float exponent of their largest |v|, kept within
/// [1, 253] so that the scale and its inverse stay normal numbers (zeros,
/// denormals, infinities and NaN included: those stay non-finite).
struct PowerScale {
    int exponent;

    __device__ __forceinline__ float factor() const
    {
        return __uint_as_float(static_cast<unsigned>(254 - exponent) << 23);
    }
};

template <int N>
__device__ __forceinline__ PowerScale power_scale(const float (&v)[N])
{
    float largest = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) largest = fmaxf(largest, fabsf(v[i]));
    const int e = static_cast<int>(__float_as_uint(largest) >> 23);
    return {min(max(e, 1), 253)};
}

/// 2^(e_a + e_b − 254): takes a sum of products of values scaled by a and b
/// back to their own scale (exactly: a power of two in double's range).
__device__ __forceinline__ double unscale(PowerScale a, PowerScale b)
{
    return __hiloint2double((a.exponent + b.exponent + 769) << 20, 0);
}

/// A thread's share of the five sums of the fused step without a
/// regularizer (g = h, e = u), in float on scaled values: w[0] = dᵀu,
/// w[1] = hᵀd, w[2] = hᵀu, w[3] = uᵀu, w[4] = hᵀh (the thread's values
/// outside the vectors must be 0). The sums without u come first, in a loop
/// of their own: u arrives last (it is loaded after a grid sync), and in
/// one loop ptxas held more values at once (the normal-matrix kernel
/// spilled 52 bytes instead of 8).
template <int N, int K>
__device__ __forceinline__ void fused_step_dots(const float (&d)[N], const float (&h)[N],
                                                const float (&u)[N], double (&w)[K])
{
    static_assert(K >= 5, "five sums");
    const PowerScale sd = power_scale(d), sh = power_scale(h);
    float t[5] = {};
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const float dd = d[i] * sd.factor(), hh = h[i] * sh.factor();
        t[1] = __fmaf_rn(hh, dd, t[1]);
        t[4] = __fmaf_rn(hh, hh, t[4]);
    }
    const PowerScale su = power_scale(u);
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const float dd = d[i] * sd.factor(), hh = h[i] * sh.factor(), uu = u[i] * su.factor();
        t[0] = __fmaf_rn(dd, uu, t[0]);
        t[2] = __fmaf_rn(hh, uu, t[2]);
        t[3] = __fmaf_rn(uu, uu, t[3]);
    }
    w[0] = t[0] * unscale(sd, su);
    w[1] = t[1] * unscale(sh, sd);
    w[2] = t[2] * unscale(sh, su);
    w[3] = t[3] * unscale(su, su);
    w[4] = t[4] * unscale(sh, sh);
}

}  // namespace recon::kernels::cuda
