#pragma once
// Small dense reference problems for the solver tests (CPU and GPU):
// least-squares matrices with known singular values (ill-conditioned ones
// among them), and
// conversions between float vectors and Eigen's double vectors.

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "recon/csr_matrix.hpp"

namespace recon::test {

using Dense = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;

/// A dense m x n matrix U diag(sigma) Vᵀ (n = sigma.size(), U and V random
/// with orthonormal columns), rounded to float32; returns the float CSR and
/// the same rounded matrix in double.
inline std::pair<CsrMatrix, Dense> with_singular_values(int m, const Vec& sigma,
                                                        std::mt19937_64& rng)
{
    const int n = static_cast<int>(sigma.size());
    std::normal_distribution<double> normal;
    Dense gu(m, n), gv(n, n);
    for (int i = 0; i < m; ++i) for (int j = 0; j < n; ++j) gu(i, j) = normal(rng);
    for (int i = 0; i < n; ++i) for (int j = 0; j < n; ++j) gv(i, j) = normal(rng);
    const Dense u = Eigen::HouseholderQR<Dense>(gu).householderQ() * Dense::Identity(m, n);
    const Dense v = Eigen::HouseholderQR<Dense>(gv).householderQ() * Dense::Identity(n, n);
    Dense a = u * sigma.asDiagonal() * v.transpose();
    CsrMatrix csr;
    csr.rows = m;
    csr.cols = n;
    csr.row_ptr.push_back(0);
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            const float value = static_cast<float>(a(i, j));
            a(i, j) = value;
            csr.col_idx.push_back(j);
            csr.values.push_back(value);
        }
        csr.row_ptr.push_back(static_cast<kernels::size_type>(csr.values.size()));
    }
    return {std::move(csr), a};
}

/// with_singular_values for singular values from 1 down to 1/condition
/// (geometric).
inline std::pair<CsrMatrix, Dense> ill_conditioned(int m, int n, double condition,
                                                   std::mt19937_64& rng)
{
    Vec sigma(n);
    for (int k = 0; k < n; ++k) sigma(k) = std::pow(condition, -static_cast<double>(k) / (n - 1));
    return with_singular_values(m, sigma, rng);
}

std::vector<float> to_float(const Vec& v) { return std::vector<float>(v.data(), v.data() + v.size()); }

Vec to_vec(const std::vector<float>& v)
{
    Vec out(static_cast<Eigen::Index>(v.size()));
    for (std::size_t i = 0; i < v.size(); ++i) out(static_cast<Eigen::Index>(i)) = v[i];
    return out;
}

}  // namespace recon::test
