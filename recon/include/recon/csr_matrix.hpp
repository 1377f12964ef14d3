#pragma once
// Host-side sparse matrices: CSR (scipy's field names) and the sliced
// ELLPACK-transposed form built from it.

#include <string>
#include <vector>

#include "kernels/common.hpp"

namespace recon {

struct CsrMatrix {
    kernels::index_t rows = 0;
    kernels::index_t cols = 0;
    std::vector<kernels::size_type> row_ptr;  // "indptr", rows + 1
    std::vector<kernels::index_t> col_idx;    // "indices"
    std::vector<float> values;                // "data"

    kernels::size_type nnz() const { return static_cast<kernels::size_type>(values.size()); }

    /// Throws std::invalid_argument, naming `source`, unless: rows, cols > 0;
    /// row_ptr has rows + 1 entries, starts at 0, never decreases and ends at
    /// nnz; indices are in [0, cols), strictly increasing within each row (no
    /// duplicates); values are finite; nnz > 0.
    void validate(const std::string& source) const;
};

/// Sliced ELLPACK-transposed copy of a CSR matrix (layout: see
/// kernels::SlicedEllView). Padding entries repeat the row's last column
/// with value 0 (column 0 for empty rows).
struct SlicedEll {
    kernels::index_t rows = 0;
    kernels::index_t cols = 0;
    kernels::index_t slice_size = 0;
    std::vector<kernels::size_type> slice_offset;  // num_slices + 1
    std::vector<kernels::index_t> slice_width;     // num_slices
    std::vector<kernels::index_t> col_idx;
    std::vector<float> values;

    kernels::index_t num_slices() const
    {
        return static_cast<kernels::index_t>(slice_width.size());
    }
    kernels::size_type stored() const { return static_cast<kernels::size_type>(values.size()); }
};

/// The order of each row's entries in a sliced ELL copy.
enum class EntryOrder {
    by_column,     // as in the CSR: increasing column
    spread_banks,  // per slice, step j of the slice's rows spread over shared-memory banks
};

/// With EntryOrder::spread_banks, each slice's entries are reordered within
/// their rows (and its padding pointed at the row's own columns) so that at
/// each step j the slice's rows touch as many different banks
/// (column mod `banks`) as possible: a warp that gathers or scatters a
/// slice's step j through shared memory then waits on fewer bank
/// conflicts. A local search minimizing Σ_j Σ_bank count² (slices of width
/// ≤ 32; wider ones keep column order). On the paper's 320,000 x 3,000
/// matrix it cuts the conflict wavefronts per slice from ~20 to ~12.4,
/// against a lower bound of ~11 (the most entries of one bank).
SlicedEll to_sliced_ell(const CsrMatrix& csr, kernels::index_t slice_size,
                        EntryOrder order = EntryOrder::by_column, kernels::index_t banks = 32);

/// Aᵀ as a CSR matrix: row j lists column j of A, rows increasing.
CsrMatrix transpose(const CsrMatrix& a);

/// The normal matrix AᵀA, dense, [cols][cols] row by row: each entry
/// summed in double over the rows that hold both columns (in row order, so
/// the result is exactly symmetric and the same every run), then rounded
/// to float. For systems with few columns (the persistent solver keeps it
/// on chip); costs Σ_i (entries of row i)² operations and cols² floats.
std::vector<float> normal_matrix(const CsrMatrix& a);

/// Reads a CSR matrix from an HDF5 group with datasets data, indices,
/// indptr and attribute shape = [m, n] (optional image_shape = [ny, nx],
/// returned through image_shape when not null), or from a Matrix Market
/// file (.mtx, coordinate real general). Validates it; errors name the file,
/// the dataset and what was wrong.
CsrMatrix read_matrix_file(const std::string& path, const std::string& group = "/matrix",
                           std::vector<long long>* image_shape = nullptr);

/// Writes a CSR matrix to an HDF5 group in the same layout (for tests and
/// tools; overwrites the file).
void write_matrix_hdf5(const std::string& path, const CsrMatrix& matrix,
                       const std::string& group = "/matrix",
                       const std::vector<long long>& image_shape = {});

}  // namespace recon
