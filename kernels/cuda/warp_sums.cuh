#pragma once
// Warp-level sums of several values at once, for the block reductions of the
// persistent kernels.

namespace recon::kernels::cuda {

namespace detail {

/// One halving step of warp_sum_scatter: lanes whose `Offset` bit is set keep
/// the upper half of their Count values, the others the lower half, and each
/// adds its partner's; then the next step (compile-time recursion, so that
/// every index is a constant and w stays in registers).
template <int Count, int Offset, int P, class T>
__device__ __forceinline__ void halve(T (&w)[P], int lane)
{
    if constexpr (Count > 1) {
        const bool upper = (lane & Offset) != 0;
#pragma unroll
        for (int i = 0; i < Count / 2; ++i) {
            const T send = upper ? w[i] : w[i + Count / 2];
            const T keep = upper ? w[i + Count / 2] : w[i];
            w[i] = keep + __shfl_xor_sync(0xffffffffu, send, Offset);
        }
        halve<Count / 2, Offset / 2>(w, lane);
    }
}

}  // namespace detail

/// Sums P values (P a power of two ≤ 32) over a warp. At each of the first
/// log2(P) steps a lane keeps one half of its values and trades the other
/// half with its partner, so the warp shuffles (P − 1) + log2(32 / P) times
/// per word of T instead of 5 P. Returns, on every lane, the warp's sum of
/// value lane / (32 / P). Overwrites w.
template <int P, class T>
__device__ __forceinline__ T warp_sum_scatter(T (&w)[P])
{
    static_assert(P >= 1 && P <= 32 && (P & (P - 1)) == 0, "P: a power of two up to 32");
    detail::halve<P, 16>(w, static_cast<int>(threadIdx.x % 32));
    T t = w[0];
#pragma unroll
    for (int offset = 16 / P; offset > 0; offset /= 2) t += __shfl_xor_sync(0xffffffffu, t, offset);
    return t;
}

}  // namespace recon::kernels::cuda
