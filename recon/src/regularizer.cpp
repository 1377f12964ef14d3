// Regularizer terms: parsing, and R(x) in double precision (the value whose
// gradient F(x, x) the kernels compute; used by tests and reports).

#include "recon/regularizer.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace recon {

using kernels::ImageGrid;
using kernels::index_t;

RegularizerKind parse_regularizer_kind(const std::string& name)
{
    if (name == "tikhonov") return RegularizerKind::tikhonov;
    if (name == "laplacian") return RegularizerKind::laplacian;
    if (name == "tv") return RegularizerKind::tv;
    if (name == "nonneg") return RegularizerKind::nonneg;
    if (name == "nonpos") return RegularizerKind::nonpos;
    throw std::invalid_argument{"unknown regularizer '" + name +
                                "' (expected tikhonov, laplacian, tv, nonneg or nonpos)"};
}

const char* to_string(RegularizerKind kind)
{
    switch (kind) {
    case RegularizerKind::tikhonov: return "tikhonov";
    case RegularizerKind::laplacian: return "laplacian";
    case RegularizerKind::tv: return "tv";
    case RegularizerKind::nonneg: return "nonneg";
    case RegularizerKind::nonpos: return "nonpos";
    }
    return "unknown";
}

namespace {

std::string trim(const std::string& s)
{
    const auto begin = s.find_first_not_of(" \t");
    if (begin == std::string::npos) return {};
    return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

double parse_weight(const std::string& text, const std::string& entry)
{
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.empty()) {
        throw std::invalid_argument{"regularizer '" + entry + "': weight '" + text +
                                    "' is not a number"};
    }
    return value;
}

}  // namespace

Regularizer Regularizer::parse(const std::string& spec, double tv_epsilon)
{
    Regularizer reg;
    const std::string text = trim(spec);
    if (text.empty() || text == "none") return reg;
    std::stringstream stream{text};
    std::string entry;
    while (std::getline(stream, entry, ',')) {
        entry = trim(entry);
        const auto colon = entry.find(':');
        if (colon == std::string::npos) {
            throw std::invalid_argument{"regularizer '" + entry +
                                        "': expected name:weight, e.g. tv:0.01"};
        }
        const RegularizerKind kind = parse_regularizer_kind(trim(entry.substr(0, colon)));
        const double weight = parse_weight(trim(entry.substr(colon + 1)), entry);
        reg.add(kind, weight, kind == RegularizerKind::tv ? tv_epsilon : 0.0);
    }
    return reg;
}

void Regularizer::add(RegularizerKind kind, double weight, double epsilon)
{
    if (!std::isfinite(weight) || weight < 0.0) {
        throw std::invalid_argument{std::string{"regularizer "} + to_string(kind) +
                                    ": weight must be a finite number >= 0, found " +
                                    std::to_string(weight)};
    }
    if (kind == RegularizerKind::tv && (!std::isfinite(epsilon) || epsilon <= 0.0)) {
        throw std::invalid_argument{"regularizer tv: epsilon must be > 0, found " +
                                    std::to_string(epsilon)};
    }
    if (terms_.count == kernels::RegularizerTerms::max_terms) {
        throw std::invalid_argument{"regularizer: at most " +
                                    std::to_string(kernels::RegularizerTerms::max_terms) +
                                    " terms"};
    }
    terms_.term[terms_.count++] = {kind, static_cast<float>(weight), static_cast<float>(epsilon)};
}

std::string Regularizer::describe() const
{
    if (empty()) return "none";
    std::ostringstream out;
    for (int t = 0; t < terms_.count; ++t) {
        const auto& term = terms_.term[t];
        if (t > 0) out << ',';
        out << to_string(term.kind) << ':' << term.weight;
        if (term.kind == RegularizerKind::tv) out << "(eps=" << term.epsilon << ')';
    }
    return out.str();
}

double Regularizer::value(const std::vector<float>& x, ImageGrid grid) const
{
    return value(std::vector<double>(x.begin(), x.end()), grid);
}

double Regularizer::value(const std::vector<double>& x, ImageGrid grid) const
{
    if (static_cast<index_t>(x.size()) != grid.size()) {
        throw std::invalid_argument{"Regularizer::value: image size does not match the grid"};
    }
    double total = 0.0;
    for (int t = 0; t < terms_.count; ++t) {
        const auto& term = terms_.term[t];
        double sum = 0.0;
        for (index_t iy = 0; iy < grid.ny; ++iy) {
            for (index_t ix = 0; ix < grid.nx; ++ix) {
                const index_t i = iy * grid.nx + ix;
                const double v = x[static_cast<std::size_t>(i)];
                const double gx = ix + 1 < grid.nx ? x[static_cast<std::size_t>(i + 1)] - v : 0.0;
                const double gy = iy + 1 < grid.ny ? x[static_cast<std::size_t>(i + grid.nx)] - v : 0.0;
                switch (term.kind) {
                case RegularizerKind::tikhonov: sum += 0.5 * v * v; break;
                case RegularizerKind::laplacian: sum += 0.5 * (gx * gx + gy * gy); break;
                case RegularizerKind::tv: {
                    const double eps = term.epsilon;
                    sum += std::sqrt(gx * gx + gy * gy + eps * eps);
                    break;
                }
                case RegularizerKind::nonneg: sum += v < 0 ? 0.5 * v * v : 0.0; break;
                case RegularizerKind::nonpos: sum += v > 0 ? 0.5 * v * v : 0.0; break;
                }
            }
        }
        total += term.weight * sum;
    }
    return total;
}

}  // namespace recon
