#pragma once
// Row generators: the entries of row i of A for each system model, as one
// host/device function per model. Both backends and materialization call the
// same code, so a row generated on the fly, on the GPU or on the CPU, and the
// stored matrix made from it have identical columns and weights, and A and
// its adjoint are matched exactly (the GPU's parallel-beam adjoint of one
// frame on mirrored tiles shares each weight with the reflected pixel, whose
// own weight rows.hpp may round apart in the last bits; see
// parallel2d_kernels.cuh).
//
// for_each_entry(view, row, f) calls f(col, weight) for every entry of the
// row (entries with weight 0 may be skipped).

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {

// Float operations rounded one by one: nvcc would otherwise fuse a product
// and a sum into one FMA on the device, and the device's weights would
// differ from the host's (the host is built with -ffp-contract=off, see
// CMakeLists.txt).

RECON_HD float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

RECON_HD float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

RECON_HD float sub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

RECON_HD float fma_rn(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

RECON_HD int float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_int(f);
#else
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
#endif
}

/// 1.5 * 2^23: for |v| < 2^22, v + magic is v rounded to an integer (ties to
/// even), and its bits minus magic's bits are that integer. Cheaper than
/// floorf + a conversion, which issue at 1/8 of the FP32 rate.
constexpr float magic = 12582912.0f;

/// floor(v) + magic, exactly, for |v| < 2^22: the sum v + magic lies where
/// floats are the integers, so rounding it down is floor(v) + magic. One
/// add on the device (add.rm); the host takes floor(v), the same value.
RECON_HD float floor_plus_magic(float v)
{
#ifdef __CUDA_ARCH__
    return __fadd_rd(v, magic);
#else
    return std::floor(v) + magic;
#endif
}

/// Counter-based 64-bit hash (splitmix64 finalizer over a mixed counter):
/// a pure function of its arguments, identical on host and device.
RECON_HD std::uint64_t hash64(std::uint64_t seed, std::uint64_t a, std::uint64_t b)
{
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (a + 1) + 0xD1B54A32D192ED03ull * (b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// Uniform float in [0, 1) from the top 24 bits of a hash.
RECON_HD float unit_float(std::uint64_t h)
{
    return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// --- synthetic ---------------------------------------------------------------

RECON_HD size_type synthetic_row_begin(const SyntheticView& v, index_t row)
{
    return static_cast<size_type>(row) * v.nnz / v.rows;
}

RECON_HD index_t synthetic_row_length(const SyntheticView& v, index_t row)
{
    return static_cast<index_t>(synthetic_row_begin(v, row + 1) -
                                synthetic_row_begin(v, row));
}

/// The weight of a synthetic entry from its hash: uniform in [0.05, 1).
RECON_HD float synthetic_weight(std::uint64_t h)
{
    return add_rn(0.05f, mul_rn(0.95f, unit_float(h)));
}

/// Where segment j of a row's `length` equal segments of the columns
/// starts: j * cols / length, for j in [0, length]. In 32 bits where
/// cols * length fits them: the same integer, and 64-bit division is a long
/// subroutine on the GPU.
RECON_HD size_type synthetic_segment_start(const SyntheticView& v, index_t j, index_t length)
{
    if (static_cast<std::uint64_t>(v.cols) * static_cast<std::uint64_t>(length) < (1ull << 32)) {
        return static_cast<std::uint32_t>(j) * static_cast<std::uint32_t>(v.cols) /
               static_cast<std::uint32_t>(length);
    }
    return static_cast<size_type>(j) * v.cols / length;
}

/// A synthetic row: the columns are split into `length` equal segments and
/// entry j takes a hashed column inside segment j (so columns are distinct
/// and sorted); weights are uniform in [0.05, 1). The host and the device
/// both generate rows here.
template <class F>
RECON_HD void for_each_entry(const SyntheticView& v, index_t row, F&& f)
{
    const index_t length = synthetic_row_length(v, row);
    size_type lo = 0;
    for (index_t j = 0; j < length; ++j) {
        const std::uint64_t h = hash64(v.seed, static_cast<std::uint64_t>(row),
                                       static_cast<std::uint64_t>(j));
        const size_type hi = synthetic_segment_start(v, j + 1, length);
        // A segment is narrower than cols < 2^31: a 32-bit remainder.
        const std::uint32_t offset =
            static_cast<std::uint32_t>(h & 0xFFFFFFFFull) % static_cast<std::uint32_t>(hi - lo);
        f(static_cast<index_t>(lo + offset), synthetic_weight(h));
        lo = hi;
    }
}

// --- parallel2d (Joseph's method) -------------------------------------------

/// Most entries a parallel2d row can have: two pixels per step along the
/// dominant axis.
RECON_HD index_t parallel2d_max_row_length(const Parallel2dView& v)
{
    return 2 * (v.nx > v.ny ? v.nx : v.ny);
}

/// Per-view constants of a parallel2d ray: it steps along its `major` image
/// axis (y when |cos| >= |sin|, else x) and crosses the minor axis at
/// p = base + slope * k at major index k.
struct ViewGeometry {
    bool step_y;
    index_t n_major, n_minor;
    float inv, scale, slope, c_minor, slope_c_major;
};

RECON_HD ViewGeometry view_geometry(const Parallel2dView& v, index_t view)
{
    ViewGeometry g;
    const float c = v.cos_angle[view];
    const float s = v.sin_angle[view];
    g.step_y = fabsf(c) >= fabsf(s);
    g.n_major = g.step_y ? v.ny : v.nx;
    g.n_minor = g.step_y ? v.nx : v.ny;
    g.inv = 1.0f / (g.step_y ? c : s);
    g.scale = fabsf(g.inv);
    g.slope = mul_rn(-(g.step_y ? s : c), g.inv);
    const float cx = 0.5f * static_cast<float>(v.nx - 1);
    const float cy = 0.5f * static_cast<float>(v.ny - 1);
    g.c_minor = g.step_y ? cx : cy;
    g.slope_c_major = mul_rn(g.slope, g.step_y ? cy : cx);
    return g;
}

/// The crossing at major index 0 of the ray of `bin`:
/// t * inv − slope * c_major + c_minor, t = bin − (bins − 1)/2 − center_offset.
RECON_HD float ray_base(const Parallel2dView& v, float inv, float slope_c_major, float c_minor,
                        index_t bin)
{
    const float t = sub_rn(sub_rn(static_cast<float>(bin), 0.5f * static_cast<float>(v.bins - 1)),
                           v.center_offset);
    return add_rn(sub_rn(mul_rn(t, inv), slope_c_major), c_minor);
}

/// p = base + slope * k.
RECON_HD float crossing(float base, float slope, float kf)
{
    return add_rn(base, mul_rn(slope, kf));
}

/// The ray of detector coordinate t at angle (c, s) = (cos, sin) is the line
/// x c + y s = t in image coordinates x = ix - (nx-1)/2, y = iy - (ny-1)/2.
/// Joseph's method steps along the axis the ray is closer to and linearly
/// interpolates between the two nearest pixels across it; each step covers a
/// path length of 1/|cos| (or 1/|sin|).
template <class F>
RECON_HD void for_each_entry(const Parallel2dView& v, index_t row, F&& f)
{
    const index_t view = row / v.bins;
    const index_t bin = row - view * v.bins;
    const ViewGeometry g = view_geometry(v, view);
    const float base = ray_base(v, g.inv, g.slope_c_major, g.c_minor, bin);
    for (index_t k = 0; k < g.n_major; ++k) {
        const float p = crossing(base, g.slope, static_cast<float>(k));
        if (!(p > -1.0f && p < static_cast<float>(g.n_minor))) continue;
        const float pf = floorf(p);
        const index_t i0 = static_cast<index_t>(pf);
        const float w1 = p - pf;
        const float w0 = 1.0f - w1;
        if (i0 >= 0 && w0 != 0.0f) {
            f(g.step_y ? k * v.nx + i0 : i0 * v.nx + k, w0 * g.scale);
        }
        if (i0 + 1 < g.n_minor && w1 != 0.0f) {
            f(g.step_y ? k * v.nx + i0 + 1 : (i0 + 1) * v.nx + k, w1 * g.scale);
        }
    }
}

// --- stored matrices ---------------------------------------------------------

template <class F>
RECON_HD void for_each_entry(const CsrView& v, index_t row, F&& f)
{
    for (size_type k = v.row_ptr[row]; k < v.row_ptr[row + 1]; ++k) {
        f(v.col_idx[k], v.values[k]);
    }
}

template <class F>
RECON_HD void for_each_entry(const SlicedEllView& v, index_t row, F&& f)
{
    const index_t slice = row / v.slice_size;
    const index_t lane = row - slice * v.slice_size;
    const size_type start = v.slice_offset[slice] + lane;
    for (index_t j = 0; j < v.slice_width[slice]; ++j) {
        const size_type k = start + static_cast<size_type>(j) * v.slice_size;
        f(v.col_idx[k], v.values[k]);
    }
}

}  // namespace recon::kernels
