// The reproducible random sparse matrix of the founding paper's sizes.

#include <stdexcept>

#include "recon/system_model.hpp"

namespace recon {

Synthetic::Synthetic(index_t rows, index_t cols, size_type nnz, std::uint64_t seed)
{
    if (rows <= 0 || cols <= 0 || nnz <= 0) {
        throw std::invalid_argument{"synthetic: rows, cols and nnz must be positive"};
    }
    // Each row's entries lie in distinct column segments, so no row may be
    // longer than the number of columns.
    if (nnz > static_cast<size_type>(rows) * cols) {
        throw std::invalid_argument{"synthetic: nnz " + std::to_string(nnz) +
                                    " exceeds rows x cols"};
    }
    view_ = kernels::SyntheticView{rows, cols, nnz, seed};
}

std::map<std::string, std::string> Synthetic::parameters() const
{
    return {{"geometry", "synthetic"},
            {"rows", std::to_string(view_.rows)},
            {"cols", std::to_string(view_.cols)},
            {"nnz", std::to_string(view_.nnz)},
            {"seed", std::to_string(view_.seed)}};
}

}  // namespace recon
