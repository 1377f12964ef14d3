// A x, Aᵀ y and the fused Aᵀ(A d) on the CPU, for every system model.
// Rows are split over OpenMP threads; the scatter of Aᵀ goes into one private
// double-precision accumulator per thread, summed in thread order afterwards
// (deterministic for a given thread count).

#include <omp.h>

#include <cstddef>
#include <variant>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/rows.hpp"

namespace recon::kernels::cpu {
namespace {

/// One row's entries. Stored matrices are read in place; rows generated on
/// the fly are generated once into a per-thread buffer and then used for
/// both the gather (A d) and the scatter (Aᵀ q).
struct RowEntries {
    const index_t* cols = nullptr;
    const float* weights = nullptr;
    std::size_t size = 0;
    std::vector<index_t> col_buffer;
    std::vector<float> weight_buffer;

    void generate(const CsrView& system, index_t row)
    {
        const size_type begin = system.row_ptr[row];
        cols = system.col_idx + begin;
        weights = system.values + begin;
        size = static_cast<std::size_t>(system.row_ptr[row + 1] - begin);
    }

    template <class System>
    void generate(const System& system, index_t row)
    {
        col_buffer.clear();
        weight_buffer.clear();
        for_each_entry(system, row, [this](index_t col, float w) {
            col_buffer.push_back(col);
            weight_buffer.push_back(w);
        });
        cols = col_buffer.data();
        weights = weight_buffer.data();
        size = col_buffer.size();
    }
};

/// Sums the per-thread accumulators into `out` (float), column-parallel.
void reduce_accumulators(const std::vector<std::vector<double>>& partial, View<float> out)
{
    const size_type size = out.size;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(size))
    for (size_type i = 0; i < size; ++i) {
        double sum = 0.0;
        for (const auto& p : partial) sum += p[static_cast<std::size_t>(i)];
        out[i] = static_cast<float>(sum);
    }
}

/// y = A x, or with b: y = A x − b (b subtracted in double before rounding).
template <class System>
void apply_rows(const System& system, int batch, View<const float> x, View<float> y,
                View<const float> subtract = {})
{
    const index_t m = rows_of(system);
    const index_t n = cols_of(system);
#pragma omp parallel
    {
        RowEntries row;
#pragma omp for schedule(static)
        for (index_t i = 0; i < m; ++i) {
            row.generate(system, i);
            for (int b = 0; b < batch; ++b) {
                const float* xb = x.data + static_cast<size_type>(b) * n;
                double sum = 0.0;
                for (std::size_t k = 0; k < row.size; ++k) {
                    sum += static_cast<double>(row.weights[k]) * xb[row.cols[k]];
                }
                const size_type k = static_cast<size_type>(b) * m + i;
                if (subtract.data != nullptr) sum -= subtract[k];
                y[k] = static_cast<float>(sum);
            }
        }
    }
}

/// Aᵀ y, and with `fused` the normal product: q_i = (A d)_i is formed per
/// row and scattered straight away, so A is generated / read once.
template <class System>
void scatter_rows(const System& system, int batch, View<const float> in, View<float> out,
                  bool fused, View<float> q)
{
    const index_t m = rows_of(system);
    const index_t n = cols_of(system);
    const int threads = omp_get_max_threads();
    std::vector<std::vector<double>> partial(static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads)
    {
        auto& acc = partial[static_cast<std::size_t>(omp_get_thread_num())];
        acc.assign(static_cast<std::size_t>(batch) * n, 0.0);
        RowEntries row;
        std::vector<double> coef(static_cast<std::size_t>(batch));
#pragma omp for schedule(static)
        for (index_t i = 0; i < m; ++i) {
            row.generate(system, i);
            for (int b = 0; b < batch; ++b) {
                if (fused) {
                    const float* db = in.data + static_cast<size_type>(b) * n;
                    double sum = 0.0;
                    for (std::size_t k = 0; k < row.size; ++k) {
                        sum += static_cast<double>(row.weights[k]) * db[row.cols[k]];
                    }
                    const float qi = static_cast<float>(sum);
                    if (q.data != nullptr) q[static_cast<size_type>(b) * m + i] = qi;
                    coef[static_cast<std::size_t>(b)] = qi;
                } else {
                    coef[static_cast<std::size_t>(b)] = in[static_cast<size_type>(b) * m + i];
                }
            }
            for (int b = 0; b < batch; ++b) {
                double* ab = acc.data() + static_cast<std::size_t>(b) * n;
                const double c = coef[static_cast<std::size_t>(b)];
                for (std::size_t k = 0; k < row.size; ++k) {
                    ab[row.cols[k]] += c * row.weights[k];
                }
            }
        }
    }
    reduce_accumulators(partial, out);
}

}  // namespace

void apply(const Executor&, const SystemView& system, int batch, View<const float> x,
           View<float> y)
{
    std::visit([&](const auto& s) { apply_rows(s, batch, x, y); }, system);
}

void residual(const Executor&, const SystemView& system, int batch, View<const float> x,
              View<const float> b, View<float> r)
{
    std::visit([&](const auto& s) { apply_rows(s, batch, x, r, b); }, system);
}

void apply_adjoint(const Executor&, const SystemView& system, int batch,
                   View<const float> y, View<float> x)
{
    std::visit([&](const auto& s) { scatter_rows(s, batch, y, x, false, View<float>{}); },
               system);
}

void normal_apply(const Executor&, const SystemView& system, int batch,
                  View<const float> d, View<float> u, View<float> q)
{
    std::visit([&](const auto& s) { scatter_rows(s, batch, d, u, true, q); }, system);
}

}  // namespace recon::kernels::cpu
