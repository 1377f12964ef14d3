#pragma once
// Warp-level sums: several values at once (the block reductions of the
// persistent kernels, the one-pass adjoint's dot sums), and the blocks'
// partial sums in one fixed order (the cooperative steps after their grid
// syncs, frame_reduce's last block).

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

/// The sum of `count` partials of two doubles each, partial i at
/// partials[i · stride], in one fixed order, by one warp (its `lane`):
/// every block that calls it gets the same bits. The result is valid in
/// lane 0. `FromL2`: loads that skip the SM's L1, where the SM may hold a
/// line of the partials from before their last store (frame_reduce_arrive:
/// a block that summed frame f − 1's partials read the line they share with
/// frame f's first ones).
template <bool FromL2 = false>
__device__ __forceinline__ double2 warp_sum_partials(unsigned lane, const double2* partials,
                                                     unsigned count, unsigned stride = 1)
{
    // Eight loads a lane in flight together (those past the end add 0),
    // summed in the same order as one at a time: these sums sit between a
    // grid sync and α or β on every block's path (ct_256's one-pass step,
    // block 0's clock on an H100: α 1.9k → 1.7k cycles, β 2.8k → 2.5k).
    constexpr unsigned in_flight = 8;
    double2 total{0.0, 0.0};
    for (unsigned i = lane; i < count; i += 32 * in_flight) {
        double2 p[in_flight];
#pragma unroll
        for (unsigned f = 0; f < in_flight; ++f) {
            const unsigned at = i + 32 * f;
            p[f] = at < count ? (FromL2 ? __ldcg(partials + at * stride) : partials[at * stride])
                              : double2{0.0, 0.0};
        }
#pragma unroll
        for (unsigned f = 0; f < in_flight; ++f) {
            total.x += p[f].x;
            total.y += p[f].y;
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        total.x += __shfl_down_sync(0xffffffffu, total.x, offset);
        total.y += __shfl_down_sync(0xffffffffu, total.y, offset);
    }
    return total;
}

}  // namespace recon::kernels::cuda
