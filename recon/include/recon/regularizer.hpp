#pragma once
// The regularizer R(x): a weighted sum of terms (DESIGN §3), each with a
// lagged Hessian-vector product F(p, v) linear in v and ∇R(x) = F(x, x).
// Parsed from config text such as "tv:0.002,nonneg:10".

#include <string>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/regularizer_views.hpp"

namespace recon {

using kernels::RegularizerKind;

class Regularizer {
public:
    /// No terms: F = 0.
    Regularizer() = default;

    /// Parses a comma-separated list of name:weight with names tikhonov,
    /// laplacian, tv, nonneg, nonpos (e.g. "tv:0.01,nonneg:5"); "" or "none"
    /// is no regularizer. tv_epsilon smooths TV. Throws std::invalid_argument
    /// naming the bad entry (unknown name, negative or non-finite weight).
    static Regularizer parse(const std::string& spec, double tv_epsilon = 1e-3);

    /// Adds one term; throws on a negative / non-finite weight or epsilon.
    void add(RegularizerKind kind, double weight, double epsilon = 0.0);

    bool empty() const { return terms_.count == 0; }
    const kernels::RegularizerTerms& terms() const { return terms_; }
    /// The spec text back, e.g. "tv:0.01(eps=0.001),nonneg:5".
    std::string describe() const;

    /// R(x) on the host in double precision, for an image [ny][nx].
    double value(const std::vector<double>& x, kernels::ImageGrid grid) const;
    double value(const std::vector<float>& x, kernels::ImageGrid grid) const;

private:
    kernels::RegularizerTerms terms_;
};

RegularizerKind parse_regularizer_kind(const std::string& name);
const char* to_string(RegularizerKind kind);

}  // namespace recon
