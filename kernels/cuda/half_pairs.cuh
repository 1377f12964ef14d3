#pragma once
// Floats as pairs of halves, for the tensor cores' half-precision products
// at nearly the float's precision (the batch kernel on the normal matrix,
// normal_matrix_batch_cgnr.cu): v scaled by a power of two into the
// halves' range, hi = fp16(v) and lo = fp16(v − hi); a product of two such
// pairs is hi·hi + hi·lo + lo·hi, each term exact (11 x 11 bits) and
// summed in float by `mma`. The exponent arithmetic that picks the scales
// is here too. cuda_half_pairs_test checks each against the host.

#include <cuda_fp16.h>

namespace recon::kernels::cuda {

/// v = hi + lo in halves, each rounded to nearest: |v − hi| ≤ 2^-11 |v|,
/// and |v − hi − lo| ≤ 2^-22 |v| where lo is a normal half (|v| ≥ ~2^-3),
/// else ≤ 2^-25 (half the halves' smallest spacing).
struct HalfPair {
    __half hi, lo;
};
__device__ __forceinline__ HalfPair split_half(float v)
{
    const __half hi = __float2half_rn(v);
    return {hi, __float2half_rn(v - __half2float(hi))};
}
__device__ __forceinline__ unsigned pack_halves(__half first, __half second)
{
    return static_cast<unsigned>(__half_as_ushort(first)) |
           static_cast<unsigned>(__half_as_ushort(second)) << 16;
}

/// v·2^e, exact where v and the result are normal floats (two products
/// by powers of two, each a float; |e| ≤ 252). Against ldexpf, a few
/// instructions on the direction step's and the product's paths.
__device__ __forceinline__ float power_of_two(int e) { return __int_as_float((e + 127) << 23); }
__device__ __forceinline__ float times_power_of_two(float v, int e)
{
    e = e < -252 ? -252 : e > 252 ? 252 : e;
    const int half = e / 2;
    return v * power_of_two(half) * power_of_two(e - half);
}

/// e with v < 2^e (v > 0 finite; a subnormal v gives −1022).
__device__ __forceinline__ int exponent_above(double v)
{
    return static_cast<int>(__double_as_longlong(v) >> 52) - 1022;
}

/// The exponent e that puts v·2^e below 2^top (v ≥ 0; 0 where v is 0 or not finite).
__device__ __forceinline__ int exponent_below(double v, int top)
{
    if (!(v > 0.0) || !isfinite(v)) return 0;
    return top - exponent_above(v);
}

/// One mma.m16n8k16 (row-major A, column-major B, f16 in, f32 accumulators).
__device__ __forceinline__ void mma_16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, uint2 b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
#endif
}

/// 2^(⌊e/2⌋ + 1) with v < 2^e: at least √2 √v, a margin beyond the
/// 1e-4 of an expanded ‖g‖², without a square root on the scalar code's
/// path (v itself where it is not positive or not finite).
__device__ __forceinline__ double root_above(double v)
{
    if (!(v > 0.0) || !isfinite(v)) return v;
    const int r = (exponent_above(v) >> 1) + 1;  // (arithmetic shift: ⌊e/2⌋)
    return __longlong_as_double(static_cast<long long>(r + 1023) << 52);
}

}  // namespace recon::kernels::cuda
