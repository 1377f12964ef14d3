#pragma once
// System models: where A (m x n) comes from (DESIGN §4). Each model is an
// operator with apply / apply_adjoint / normal_apply, can list a row and
// materialize itself, and hands kernels a SystemView for any executor.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/executor.hpp"
#include "kernels/memory.hpp"
#include "kernels/parallel2d_adjoint.hpp"
#include "kernels/parallel2d_rays.hpp"
#include "kernels/system_views.hpp"
#include "recon/csr_matrix.hpp"

namespace recon {

using kernels::Executor;
using kernels::index_t;
using kernels::size_type;
using kernels::View;

/// Image grid of a model: n = nx * ny, row-major [ny][nx].
struct ImageShape {
    index_t ny = 1;
    index_t nx = 1;
    index_t size() const { return ny * nx; }
};

class SystemModel {
public:
    virtual ~SystemModel() = default;

    /// "matrix", "parallel2d" or "synthetic".
    virtual std::string kind() const = 0;
    /// The model's parameters as "key=value" pairs (written to output files).
    virtual std::map<std::string, std::string> parameters() const = 0;
    virtual index_t rows() const = 0;
    virtual index_t cols() const = 0;
    /// The image grid regularizers see; (1, n) when the model has none.
    virtual ImageShape image_shape() const { return {1, cols()}; }

    /// The kernels' description of A in `exec`'s memory. Device-side data
    /// (angles, stored matrices) is uploaded on first use per device and
    /// kept; the view stays valid while the model lives. Thread-safe.
    virtual kernels::SystemView view(const Executor& exec) const = 0;

    /// Row i as (column, weight) pairs, in generation order.
    std::vector<std::pair<index_t, float>> row(index_t i) const;
    /// A as an explicit CSR matrix (entries of weight 0 dropped).
    virtual CsrMatrix materialize() const;

    /// y = A x, x = Aᵀ y, u = Aᵀ(A d) for `batch` frames in exec's memory.
    void apply(const Executor& exec, View<const float> x, View<float> y, int batch = 1) const;
    void apply_adjoint(const Executor& exec, View<const float> y, View<float> x,
                       int batch = 1) const;
    void normal_apply(const Executor& exec, View<const float> d, View<float> u,
                      int batch = 1) const;
};

/// On-the-fly 2D parallel-beam geometry (rows by Joseph's method).
/// Angles in degrees; the centre-of-rotation offset is in bins (positive
/// moves the axis's projection towards higher bin indices).
class Parallel2d final : public SystemModel {
public:
    Parallel2d(index_t nx, index_t ny, index_t bins, std::vector<double> angles_deg,
               double center_offset = 0.0);

    std::string kind() const override { return "parallel2d"; }
    std::map<std::string, std::string> parameters() const override;
    index_t rows() const override;
    index_t cols() const override { return nx_ * ny_; }
    ImageShape image_shape() const override { return {ny_, nx_}; }
    kernels::SystemView view(const Executor& exec) const override;

    const std::vector<double>& angles_deg() const { return angles_deg_; }
    index_t bins() const { return bins_; }
    index_t views() const { return static_cast<index_t>(angles_deg_.size()); }

private:
    /// What a device's view points to: the angles, the order of the rays
    /// kernel's blocks and their rays (kernels/parallel2d_rays.hpp), and the
    /// adjoint's constants per tile and view (kernels/parallel2d_adjoint.hpp;
    /// empty for very large systems).
    struct DeviceArrays {
        kernels::Array<float> cos_angle;
        kernels::Array<float> sin_angle;
        kernels::Array<std::int32_t> rays_order;
        kernels::Array<kernels::RaySetup> rays;
        kernels::Array<kernels::AdjointView> adjoint_views;
    };
    kernels::Parallel2dView make_view(const float* cos_angle, const float* sin_angle,
                                      const std::int32_t* rays_order = nullptr,
                                      const kernels::RaySetup* rays = nullptr,
                                      const kernels::AdjointView* adjoint_views = nullptr) const;

    index_t nx_, ny_, bins_;
    std::vector<double> angles_deg_;
    double center_offset_;
    std::vector<float> cos_, sin_;
    mutable std::mutex mutex_;
    mutable std::map<int, DeviceArrays> device_;
};

/// Reproducible random sparse matrix generated on the fly (see
/// kernels::SyntheticView). paper_large(): 320,000 x 3,000, 1.8M nonzeros;
/// paper_small(): 81,545 x 3,072, 854,129 nonzeros.
class Synthetic final : public SystemModel {
public:
    Synthetic(index_t rows, index_t cols, size_type nnz, std::uint64_t seed = 1);
    static Synthetic paper_large(std::uint64_t seed = 1) { return {320000, 3000, 1800000, seed}; }
    static Synthetic paper_small(std::uint64_t seed = 1) { return {81545, 3072, 854129, seed}; }

    std::string kind() const override { return "synthetic"; }
    std::map<std::string, std::string> parameters() const override;
    index_t rows() const override { return view_.rows; }
    index_t cols() const override { return view_.cols; }
    kernels::SystemView view(const Executor&) const override { return view_; }
    size_type nnz() const { return view_.nnz; }

private:
    kernels::SyntheticView view_;
};

/// Device-side layout of a stored matrix.
enum class MatrixLayout {
    csr,         // compressed sparse rows
    sliced_ell,  // ELLPACK-transposed in slices of 32 rows
    automatic,   // CSR on the CPU; sliced ELL on CUDA unless padding > 2x nnz
};

MatrixLayout parse_matrix_layout(const std::string& text);
const char* to_string(MatrixLayout layout);

/// An explicit sparse matrix (from a file, or a materialized model).
class StoredMatrix final : public SystemModel {
public:
    /// Validates `matrix` (throws std::invalid_argument naming `source`).
    /// `ell_order`: the entry order of its sliced ELL copies (the default
    /// spreads each slice step over shared-memory banks; by_column is kept
    /// for comparing the two in `recon bench`).
    StoredMatrix(CsrMatrix matrix, MatrixLayout layout = MatrixLayout::automatic,
                 std::string source = "matrix", ImageShape image_shape = {},
                 EntryOrder ell_order = EntryOrder::spread_banks);

    std::string kind() const override { return "matrix"; }
    std::map<std::string, std::string> parameters() const override;
    index_t rows() const override { return matrix_.rows; }
    index_t cols() const override { return matrix_.cols; }
    ImageShape image_shape() const override;
    kernels::SystemView view(const Executor& exec) const override;
    CsrMatrix materialize() const override { return matrix_; }

    const CsrMatrix& csr() const { return matrix_; }
    /// The layout view(exec) uses on exec's backend.
    MatrixLayout layout_for(const Executor& exec) const;

private:
    struct DeviceCopy;
    /// An image grid was given (the default {1, 1} means none).
    bool has_image_shape() const { return image_shape_.ny != 1 || image_shape_.nx != 1; }

    CsrMatrix matrix_;
    MatrixLayout layout_;
    std::string source_;
    ImageShape image_shape_;
    EntryOrder ell_order_;
    mutable std::mutex mutex_;
    mutable std::map<std::pair<int, int>, std::shared_ptr<DeviceCopy>> device_;
};

/// Everything needed to build a model, as configs and recordings name it.
struct SystemSpec {
    std::string geometry = "parallel2d";  // matrix | parallel2d | synthetic
    // parallel2d
    index_t nx = 256, ny = 256, bins = 0;  // bins 0: nx
    index_t views = 180;
    double angle_range_deg = 180.0;        // angles k * range / views when none given
    std::vector<double> angles_deg;        // from the recording, when present
    double center_offset = 0.0;
    // synthetic
    index_t rows = 320000, cols = 3000;
    size_type nnz = 1800000;
    std::uint64_t seed = 1;
    // matrix
    std::string matrix_file;
    std::string matrix_group = "/matrix";
    // any model: materialize to a stored matrix instead of generating rows
    bool materialize = false;
    MatrixLayout layout = MatrixLayout::automatic;
};

/// Builds the model a spec names; throws std::invalid_argument with a
/// one-line message naming the bad parameter.
std::unique_ptr<SystemModel> make_system_model(const SystemSpec& spec);

}  // namespace recon
