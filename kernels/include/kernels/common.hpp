#pragma once
// Basic types and the host/device qualifier shared by both backends.

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RECON_HD __host__ __device__ __forceinline__
#else
#define RECON_HD inline
#endif

namespace recon::kernels {

/// Row and column indices of system matrices and images.
using index_t = std::int32_t;
/// Counts of nonzeros and offsets into nonzero arrays (can exceed 2^31).
using size_type = std::int64_t;

/// Non-owning, trivially copyable view of a contiguous array in one memory
/// space (host or device). Passed by value into kernels.
template <class T>
struct View {
    T* data = nullptr;
    size_type size = 0;

    RECON_HD T& operator[](size_type i) const { return data[i]; }
    RECON_HD bool empty() const { return size == 0; }
};

/// Whether v is neither infinite nor NaN, on the host and the device alike.
template <class T>
RECON_HD bool is_finite(T v)
{
#if defined(__CUDA_ARCH__)
    return isfinite(v);
#else
    return std::isfinite(v);
#endif
}

}  // namespace recon::kernels

namespace recon::kernels::cpu {

/// Image-space vectors (a few thousand floats) are cheaper on one thread than
/// the fork/join of a parallel region, which on a loaded machine can cost
/// more than the whole loop; only larger loops are split over threads.
inline bool parallel_worthwhile(size_type elements) { return elements >= 32768; }

}  // namespace recon::kernels::cpu
