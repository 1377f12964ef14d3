#pragma once
// Shared helpers for the test suites: fresh random inputs (seed printed on
// failure via SCOPED_TRACE), norms, relative errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/common.hpp"

namespace recon::test {

/// A fresh seed per call (from std::random_device) so that every run draws
/// new inputs; tests put it in a SCOPED_TRACE so a failure can be replayed.
inline std::uint64_t fresh_seed()
{
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

inline std::vector<float> random_vector(std::size_t size, std::mt19937_64& rng, float lo = -1.0f,
                                        float hi = 1.0f)
{
    std::uniform_real_distribution<float> dist{lo, hi};
    std::vector<float> v(size);
    for (auto& x : v) x = dist(rng);
    return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b)
{
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

inline double norm(const std::vector<float>& a) { return std::sqrt(dot(a, a)); }

template <class A, class B>
double rel_error(const A& x, const B& ref)
{
    double num = 0, den = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(ref.size()); ++i) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(ref[i]);
        num += d * d;
        den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
    }
    return std::sqrt(num / den);
}

template <class T>
kernels::View<T> view_of(std::vector<T>& v)
{
    return {v.data(), static_cast<kernels::size_type>(v.size())};
}

template <class T>
kernels::View<const T> cview_of(const std::vector<T>& v)
{
    return {v.data(), static_cast<kernels::size_type>(v.size())};
}

inline std::string seed_trace(std::uint64_t seed) { return "seed = " + std::to_string(seed); }

}  // namespace recon::test
