#pragma once
// Shared helpers for the test suites: fresh random inputs (seed printed on
// failure via SCOPED_TRACE), norms, relative errors.

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common.hpp"

namespace recon::test {

/// Sets an environment variable (the kernels' switches for comparing
/// paths, RECON_TEST_SEED) for the lifetime of the object, then puts back
/// what was there.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_{name}
    {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv()
    {
        if (old_) {
            setenv(name_, old_->c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

/// A fresh seed per call (from std::random_device) so that every run draws
/// new inputs; tests put it in a SCOPED_TRACE so that a failure can be
/// replayed: with RECON_TEST_SEED set (to the seed a failure printed), every
/// call returns that seed instead.
inline std::uint64_t fresh_seed()
{
    if (const char* fixed = std::getenv("RECON_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
        char* end = nullptr;
        errno = 0;
        const unsigned long long seed = std::strtoull(fixed, &end, 10);
        if (errno != 0 || *end != '\0' || *fixed == '-') {
            throw std::invalid_argument{std::string{"RECON_TEST_SEED: not a 64-bit unsigned seed: '"} +
                                        fixed + "'"};
        }
        return seed;
    }
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

/// What a test's SCOPED_TRACE prints for its seed: the seed and how to replay it.
inline std::string seed_trace(std::uint64_t seed)
{
    const std::string s = std::to_string(seed);
    return "seed = " + s + " (RECON_TEST_SEED=" + s + " replays it)";
}

}  // namespace recon::test
