// An explicit sparse matrix, kept on the host as CSR and copied to each
// executor's memory in the layout that suits it.

#include <algorithm>
#include <stdexcept>

#include "recon/system_model.hpp"

namespace recon {

namespace {
/// Rows per ELL slice: one warp, so a slice is read by consecutive lanes.
constexpr index_t ell_slice_size = 32;
/// Above this padding overhead the ELL layout costs more than CSR.
constexpr double max_ell_padding = 2.0;
}  // namespace

struct StoredMatrix::DeviceCopy {
    kernels::Array<size_type> offsets;  // row_ptr or slice_offset
    kernels::Array<index_t> widths;     // slice_width (ELL only)
    kernels::Array<index_t> col_idx;
    kernels::Array<float> values;
    kernels::SystemView view;
};

StoredMatrix::StoredMatrix(CsrMatrix matrix, MatrixLayout layout, std::string source,
                           ImageShape image_shape, EntryOrder ell_order)
    : matrix_{std::move(matrix)}, layout_{layout}, source_{std::move(source)},
      image_shape_{image_shape}, ell_order_{ell_order}
{
    matrix_.validate(source_);
    if (has_image_shape()) {
        if (image_shape_.ny <= 0 || image_shape_.nx <= 0 || image_shape_.size() != matrix_.cols) {
            throw std::invalid_argument{source_ + ": image_shape " + std::to_string(image_shape_.ny) +
                                        " x " + std::to_string(image_shape_.nx) +
                                        " does not match " + std::to_string(matrix_.cols) +
                                        " columns"};
        }
    }
}

ImageShape StoredMatrix::image_shape() const
{
    return has_image_shape() ? image_shape_ : ImageShape{1, matrix_.cols};
}

std::map<std::string, std::string> StoredMatrix::parameters() const
{
    return {{"geometry", "matrix"},
            {"source", source_},
            {"rows", std::to_string(matrix_.rows)},
            {"cols", std::to_string(matrix_.cols)},
            {"nnz", std::to_string(matrix_.nnz())},
            {"layout", to_string(layout_)}};
}

MatrixLayout StoredMatrix::layout_for(const Executor& exec) const
{
    if (layout_ != MatrixLayout::automatic) return layout_;
    if (exec.is_cpu()) return MatrixLayout::csr;
    // Padding of the sliced layout, from the row lengths alone.
    size_type padded = 0;
    for (index_t s = 0; s * ell_slice_size < matrix_.rows; ++s) {
        size_type width = 0;
        const index_t end = std::min(matrix_.rows, (s + 1) * ell_slice_size);
        for (index_t i = s * ell_slice_size; i < end; ++i) {
            width = std::max(width, matrix_.row_ptr[i + 1] - matrix_.row_ptr[i]);
        }
        padded += width * ell_slice_size;
    }
    return padded <= max_ell_padding * static_cast<double>(matrix_.nnz()) ? MatrixLayout::sliced_ell
                                                                          : MatrixLayout::csr;
}

kernels::SystemView StoredMatrix::view(const Executor& exec) const
{
    const MatrixLayout layout = layout_for(exec);
    if (exec.is_cpu() && layout == MatrixLayout::csr) {
        return kernels::CsrView{matrix_.rows, matrix_.cols, matrix_.row_ptr.data(),
                                matrix_.col_idx.data(), matrix_.values.data()};
    }
    const std::pair<int, int> key{exec.is_cpu() ? -1 : exec.device(), static_cast<int>(layout)};
    std::lock_guard lock{mutex_};
    auto it = device_.find(key);
    if (it != device_.end()) return it->second->view;

    auto copy = std::make_shared<DeviceCopy>();
    if (layout == MatrixLayout::csr) {
        copy->offsets = kernels::Array<size_type>{exec, matrix_.row_ptr};
        copy->col_idx = kernels::Array<index_t>{exec, matrix_.col_idx};
        copy->values = kernels::Array<float>{exec, matrix_.values};
        copy->view = kernels::CsrView{matrix_.rows, matrix_.cols, copy->offsets.data(),
                                      copy->col_idx.data(), copy->values.data()};
    } else {
        // By default entries spread over shared-memory banks: the persistent
        // kernel stages a warp's slice in shared memory and gathers and
        // scatters through it step by step.
        const SlicedEll ell = to_sliced_ell(matrix_, ell_slice_size, ell_order_);
        copy->offsets = kernels::Array<size_type>{exec, ell.slice_offset};
        copy->widths = kernels::Array<index_t>{exec, ell.slice_width};
        copy->col_idx = kernels::Array<index_t>{exec, ell.col_idx};
        copy->values = kernels::Array<float>{exec, ell.values};
        copy->view = kernels::SlicedEllView{ell.rows,          ell.cols,
                                            ell.slice_size,    ell.num_slices(),
                                            copy->offsets.data(), copy->widths.data(),
                                            copy->col_idx.data(), copy->values.data()};
    }
    exec.synchronize();  // the host vectors above die at return
    device_.emplace(key, copy);
    return copy->view;
}

}  // namespace recon
