#pragma once
// Trivially copyable descriptions of the system matrix A (m x n), one per
// system model. Pointers refer to the memory space of the executor the view
// was made for. Kernels take a SystemView and dispatch on its alternative.

#include <cstddef>
#include <cstdint>
#include <variant>

#include "kernels/common.hpp"

namespace recon::kernels {

/// Compressed sparse rows: row i holds entries row_ptr[i] .. row_ptr[i+1]-1.
struct CsrView {
    index_t rows = 0;
    index_t cols = 0;
    const size_type* row_ptr = nullptr;  // rows + 1
    const index_t* col_idx = nullptr;    // nnz
    const float* values = nullptr;       // nnz
};

/// Sliced ELLPACK, transposed within each slice (the founding paper's
/// ELLPACK-transposed layout, sliced so that irregular row lengths do not pad
/// every row to the longest one). Rows are grouped in slices of
/// `slice_size`; slice s has width slice_width[s] and starts at
/// slice_offset[s]; entry j of row i (slice s = i / slice_size, lane
/// l = i % slice_size) sits at slice_offset[s] + j * slice_size + l, so
/// consecutive rows read consecutive addresses. Padding entries have value 0
/// and a valid column index. With one slice this is plain ELLPACK-T.
struct SlicedEllView {
    index_t rows = 0;
    index_t cols = 0;
    index_t slice_size = 0;
    index_t num_slices = 0;
    const size_type* slice_offset = nullptr;  // num_slices + 1
    const index_t* slice_width = nullptr;     // num_slices
    const index_t* col_idx = nullptr;         // slice_offset[num_slices]
    const float* values = nullptr;            // slice_offset[num_slices]
};

struct RaySetup;     // parallel2d_rays.hpp
struct AdjointView;  // parallel2d_adjoint.hpp

/// Largest table a parallel-beam system makes for the GPU kernels (its
/// rays, its adjoint's views); above it the kernels make those values
/// themselves. ct_256 needs 1.5 and 2.2 MB; a 2048 x 2048 image of 720
/// views would need 566 MB for the adjoint's.
constexpr std::size_t parallel2d_table_max_bytes = std::size_t{64} << 20;

/// 2D parallel-beam CT, rows generated on the fly (Joseph's method).
/// Image [ny][nx] of unit pixels centred on the rotation axis; sinogram
/// [views][bins], bins of unit width; row index = view * bins + bin.
/// Detector coordinate of bin k: t = k - (bins - 1) / 2 - center_offset.
struct Parallel2dView {
    index_t nx = 0;
    index_t ny = 0;
    index_t views = 0;
    index_t bins = 0;
    float center_offset = 0.0f;
    const float* cos_angle = nullptr;  // views
    const float* sin_angle = nullptr;  // views
    /// The GPU rays kernel's blocks' items in the order to hand them out
    /// (parallel2d_rays.hpp), or null: its centre-out order.
    const std::int32_t* rays_order = nullptr;
    /// Those blocks' rays, made once (parallel2d_rays.hpp's RaySetup, in
    /// rays_order's order), or null: each thread makes its own.
    const RaySetup* rays = nullptr;
    /// The adjoint's constants of every (tile, view) (parallel2d_adjoint.hpp),
    /// or null: each block makes its own.
    const AdjointView* adjoint_views = nullptr;
};

/// Reproducible random sparse matrix: row i is a pure function of
/// (seed, i). Row lengths are floor((i+1) nnz / rows) - floor(i nnz / rows),
/// so the total is exactly `nnz` and the mean row length nnz / rows may be
/// fractional; columns are distinct and sorted within a row.
struct SyntheticView {
    index_t rows = 0;
    index_t cols = 0;
    size_type nnz = 0;
    std::uint64_t seed = 0;
};

using SystemView = std::variant<CsrView, SlicedEllView, Parallel2dView, SyntheticView>;

RECON_HD index_t rows_of(const CsrView& v) { return v.rows; }
RECON_HD index_t rows_of(const SlicedEllView& v) { return v.rows; }
RECON_HD index_t rows_of(const Parallel2dView& v) { return v.views * v.bins; }
RECON_HD index_t rows_of(const SyntheticView& v) { return v.rows; }
RECON_HD index_t cols_of(const CsrView& v) { return v.cols; }
RECON_HD index_t cols_of(const SlicedEllView& v) { return v.cols; }
RECON_HD index_t cols_of(const Parallel2dView& v) { return v.nx * v.ny; }
RECON_HD index_t cols_of(const SyntheticView& v) { return v.cols; }

inline index_t rows_of(const SystemView& v)
{
    return std::visit([](const auto& s) { return rows_of(s); }, v);
}
inline index_t cols_of(const SystemView& v)
{
    return std::visit([](const auto& s) { return cols_of(s); }, v);
}

}  // namespace recon::kernels
