// CSR validation, the sliced ELLPACK-transposed layout and the normal matrix.

#include "recon/csr_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace recon {

using kernels::index_t;
using kernels::size_type;

namespace {

[[noreturn]] void invalid(const std::string& source, const std::string& what)
{
    throw std::invalid_argument{source + ": " + what};
}

/// Squared-count cost of a slice's bank use, counts[j * banks + bank].
struct BankCounts {
    index_t banks;
    std::vector<int> counts;

    int& at(index_t step, index_t col) { return counts[static_cast<std::size_t>(step * banks + col % banks)]; }
    /// Change of Σ count² when one entry of `step` moves from column `from` to `to`'s bank.
    int move_cost(index_t step, index_t from, index_t to)
    {
        if (from % banks == to % banks) return 0;
        return 2 * (at(step, to) - at(step, from)) + 2;
    }
    void move(index_t step, index_t from, index_t to)
    {
        --at(step, from);
        ++at(step, to);
    }
};

/// Reorders the entries of slice s (see EntryOrder::spread_banks).
void spread_slice_over_banks(SlicedEll& ell, const CsrMatrix& csr, index_t s, index_t banks)
{
    const index_t width = ell.slice_width[s];
    const index_t first = s * ell.slice_size;
    const index_t lanes = std::min(ell.slice_size, csr.rows - first);
    const auto k_of = [&](index_t lane, index_t j) {
        return static_cast<std::size_t>(ell.slice_offset[s] + static_cast<size_type>(j) * ell.slice_size + lane);
    };
    BankCounts bc{banks, std::vector<int>(static_cast<std::size_t>(width * banks), 0)};
    std::vector<char> padding(static_cast<std::size_t>(lanes * width));  // [lane][j]
    for (index_t lane = 0; lane < lanes; ++lane) {
        const index_t row = first + lane;
        for (index_t j = 0; j < width; ++j) {
            ++bc.at(j, ell.col_idx[k_of(lane, j)]);
            padding[static_cast<std::size_t>(lane * width + j)] = j >= csr.row_ptr[row + 1] - csr.row_ptr[row];
        }
    }
    constexpr int max_sweeps = 4;  // converges in 2-3 on random rows
    for (int sweep = 0; sweep < max_sweeps; ++sweep) {
        bool improved = false;
        for (index_t lane = 0; lane < lanes; ++lane) {
            const index_t row = first + lane;
            const auto length = static_cast<index_t>(csr.row_ptr[row + 1] - csr.row_ptr[row]);
            // Swap two steps' entries of this row.
            for (index_t j1 = 0; j1 < width; ++j1) {
                for (index_t j2 = j1 + 1; j2 < width; ++j2) {
                    const index_t c1 = ell.col_idx[k_of(lane, j1)];
                    const index_t c2 = ell.col_idx[k_of(lane, j2)];
                    if (c1 % banks == c2 % banks) continue;
                    // The two moves touch different steps, so their costs add.
                    if (bc.move_cost(j1, c1, c2) + bc.move_cost(j2, c2, c1) >= 0) continue;
                    bc.move(j1, c1, c2);
                    bc.move(j2, c2, c1);
                    std::swap(ell.col_idx[k_of(lane, j1)], ell.col_idx[k_of(lane, j2)]);
                    std::swap(ell.values[k_of(lane, j1)], ell.values[k_of(lane, j2)]);
                    std::swap(padding[static_cast<std::size_t>(lane * width + j1)],
                              padding[static_cast<std::size_t>(lane * width + j2)]);
                    improved = true;
                }
            }
            // Point each padding entry at the row's column whose bank is
            // least used at its step.
            for (index_t j = 0; j < width && length > 0; ++j) {
                if (!padding[static_cast<std::size_t>(lane * width + j)]) continue;
                const index_t now = ell.col_idx[k_of(lane, j)];
                index_t best = now;
                int best_cost = 0;
                for (size_type k = csr.row_ptr[row]; k < csr.row_ptr[row + 1]; ++k) {
                    const index_t c = csr.col_idx[static_cast<std::size_t>(k)];
                    const int cost = bc.move_cost(j, now, c);
                    if (cost < best_cost) {
                        best = c;
                        best_cost = cost;
                    }
                }
                if (best != now) {
                    bc.move(j, now, best);
                    ell.col_idx[k_of(lane, j)] = best;
                    improved = true;
                }
            }
        }
        if (!improved) break;
    }
}

}  // namespace

void CsrMatrix::validate(const std::string& source) const
{
    if (rows <= 0 || cols <= 0) {
        invalid(source, "matrix shape must be positive, found " + std::to_string(rows) + " x " +
                            std::to_string(cols));
    }
    if (row_ptr.size() != static_cast<std::size_t>(rows) + 1) {
        invalid(source, "indptr must have rows + 1 = " + std::to_string(rows + 1) +
                            " entries, found " + std::to_string(row_ptr.size()));
    }
    if (col_idx.size() != values.size()) {
        invalid(source, "indices and data differ in length (" + std::to_string(col_idx.size()) +
                            " vs " + std::to_string(values.size()) + ")");
    }
    if (values.empty()) invalid(source, "matrix is empty (no nonzeros)");
    if (row_ptr.front() != 0) {
        invalid(source, "indptr[0] must be 0, found " + std::to_string(row_ptr.front()));
    }
    if (row_ptr.back() != nnz()) {
        invalid(source, "indptr[rows] must equal nnz = " + std::to_string(nnz()) + ", found " +
                            std::to_string(row_ptr.back()));
    }
    for (index_t i = 0; i < rows; ++i) {
        const size_type begin = row_ptr[i];
        const size_type end = row_ptr[i + 1];
        if (end < begin) {
            invalid(source, "indptr is not monotone at row " + std::to_string(i) + " (" +
                                std::to_string(begin) + " then " + std::to_string(end) + ")");
        }
        for (size_type k = begin; k < end; ++k) {
            const index_t c = col_idx[static_cast<std::size_t>(k)];
            if (c < 0 || c >= cols) {
                invalid(source, "column index " + std::to_string(c) + " out of range [0, " +
                                    std::to_string(cols) + ") in row " + std::to_string(i));
            }
            if (k > begin && c <= col_idx[static_cast<std::size_t>(k - 1)]) {
                invalid(source, std::string{"column indices "} +
                                    (c == col_idx[static_cast<std::size_t>(k - 1)] ? "duplicated"
                                                                                    : "unsorted") +
                                    " in row " + std::to_string(i) + " (" +
                                    std::to_string(col_idx[static_cast<std::size_t>(k - 1)]) +
                                    " then " + std::to_string(c) + ")");
            }
            if (!std::isfinite(values[static_cast<std::size_t>(k)])) {
                invalid(source, "non-finite value in row " + std::to_string(i));
            }
        }
    }
}

SlicedEll to_sliced_ell(const CsrMatrix& csr, index_t slice_size, EntryOrder order, index_t banks)
{
    if (slice_size <= 0) throw std::invalid_argument{"sliced ELL: slice size must be positive"};
    if (banks <= 0) throw std::invalid_argument{"sliced ELL: bank count must be positive"};
    SlicedEll ell;
    ell.rows = csr.rows;
    ell.cols = csr.cols;
    ell.slice_size = slice_size;
    const index_t slices = (csr.rows + slice_size - 1) / slice_size;
    ell.slice_width.resize(static_cast<std::size_t>(slices));
    ell.slice_offset.assign(static_cast<std::size_t>(slices) + 1, 0);
    for (index_t s = 0; s < slices; ++s) {
        index_t width = 0;
        for (index_t i = s * slice_size; i < std::min(csr.rows, (s + 1) * slice_size); ++i) {
            width = std::max(width, static_cast<index_t>(csr.row_ptr[i + 1] - csr.row_ptr[i]));
        }
        ell.slice_width[s] = width;
        ell.slice_offset[s + 1] = ell.slice_offset[s] + static_cast<size_type>(width) * slice_size;
    }
    const auto stored = static_cast<std::size_t>(ell.slice_offset.back());
    ell.col_idx.assign(stored, 0);
    ell.values.assign(stored, 0.0f);
    for (index_t i = 0; i < csr.rows; ++i) {
        const index_t s = i / slice_size;
        const index_t lane = i - s * slice_size;
        const size_type begin = csr.row_ptr[i];
        const index_t length = static_cast<index_t>(csr.row_ptr[i + 1] - begin);
        // Padding repeats the last column (a harmless read of a cached address).
        const index_t pad_col = length > 0 ? csr.col_idx[static_cast<std::size_t>(begin + length - 1)] : 0;
        for (index_t j = 0; j < ell.slice_width[s]; ++j) {
            const auto k = static_cast<std::size_t>(ell.slice_offset[s] +
                                                    static_cast<size_type>(j) * slice_size + lane);
            if (j < length) {
                ell.col_idx[k] = csr.col_idx[static_cast<std::size_t>(begin + j)];
                ell.values[k] = csr.values[static_cast<std::size_t>(begin + j)];
            } else {
                ell.col_idx[k] = pad_col;
            }
        }
    }
    if (order == EntryOrder::spread_banks) {
        constexpr index_t widest_spread = 32;  // the search is quadratic in the width
        for (index_t s = 0; s < slices; ++s) {
            if (ell.slice_width[s] <= widest_spread) spread_slice_over_banks(ell, csr, s, banks);
        }
    }
    return ell;
}

CsrMatrix transpose(const CsrMatrix& a)
{
    CsrMatrix t;
    t.rows = a.cols;
    t.cols = a.rows;
    t.row_ptr.assign(static_cast<std::size_t>(a.cols) + 1, 0);
    for (const index_t j : a.col_idx) ++t.row_ptr[static_cast<std::size_t>(j) + 1];
    for (std::size_t j = 0; j < static_cast<std::size_t>(a.cols); ++j) t.row_ptr[j + 1] += t.row_ptr[j];
    t.col_idx.resize(a.col_idx.size());
    t.values.resize(a.values.size());
    std::vector<size_type> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
    for (index_t i = 0; i < a.rows; ++i) {
        for (size_type p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
            const size_type at = next[static_cast<std::size_t>(a.col_idx[p])]++;
            t.col_idx[at] = i;
            t.values[at] = a.values[p];
        }
    }
    return t;
}

std::vector<float> normal_matrix(const CsrMatrix& a)
{
    const auto n = static_cast<std::size_t>(a.cols);
    const CsrMatrix columns = transpose(a);  // row j: column j of A, rows increasing
    // Row j of AᵀA = Σ over the rows i of column j of A_ij · (row i of A).
    // Products of two floats are exact in double, so entry (j, k) and
    // (k, j) add the same terms in the same order.
    std::vector<float> g(n * n);
#pragma omp parallel
    {
        std::vector<double> row(n);
#pragma omp for schedule(dynamic, 16)
        for (std::int64_t j = 0; j < static_cast<std::int64_t>(n); ++j) {
            std::fill(row.begin(), row.end(), 0.0);
            for (size_type p = columns.row_ptr[j]; p < columns.row_ptr[j + 1]; ++p) {
                const index_t i = columns.col_idx[p];
                const double w = columns.values[p];
                for (size_type q = a.row_ptr[i]; q < a.row_ptr[i + 1]; ++q) {
                    row[static_cast<std::size_t>(a.col_idx[q])] += w * a.values[q];
                }
            }
            std::transform(row.begin(), row.end(), g.begin() + j * static_cast<std::int64_t>(n),
                           [](double v) { return static_cast<float>(v); });
        }
    }
    return g;
}

}  // namespace recon
