// fused_step_dots (kernels/cuda/scaled_dots.cuh), one thread per case, on
// the device against the same sums in double on the host: random vectors at
// scales from float's smallest normal numbers to its largest, each vector at
// its own scale, zeros, denormals, and non-finite entries (which must stay
// non-finite).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_support.hpp"
#include "scaled_dots.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int n = 12;     // values per thread, as the normal-matrix kernel
constexpr int sums = 5;   // dᵀu, hᵀd, hᵀu, uᵀu, hᵀh

using Values = std::array<float, n>;
struct Case {
    float d[n], h[n], u[n];  // (plain arrays: the kernel reads them)
};
Case case_of(const Values& d, const Values& h, const Values& u)
{
    Case c{};
    for (int j = 0; j < n; ++j) {
        c.d[j] = d[j];
        c.h[j] = h[j];
        c.u[j] = u[j];
    }
    return c;
}

__global__ void fused_step_dots_kernel(const Case* cases, int count, double* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    float d[n], h[n], u[n];
    for (int j = 0; j < n; ++j) {
        d[j] = cases[i].d[j];
        h[j] = cases[i].h[j];
        u[j] = cases[i].u[j];
    }
    double w[8] = {};
    fused_step_dots(d, h, u, w);
    for (int q = 0; q < sums; ++q) out[i * sums + q] = w[q];
}

/// The five sums of each case on the device.
std::vector<double> on_device(const std::vector<Case>& cases)
{
    const int count = static_cast<int>(cases.size());
    const Array<Case> in = test::upload(cases);
    Array<double> out{test::gpu(), static_cast<size_type>(cases.size() * sums)};
    fused_step_dots_kernel<<<(count + 127) / 128, 128>>>(in.data(), count, out.data());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return out.to_host();
}

/// One sum in double over the float values, and the sum of its terms' sizes.
struct Reference {
    double sum = 0, size = 0;
};
Reference reference(const float (&a)[n], const float (&b)[n])
{
    Reference r;
    for (int j = 0; j < n; ++j) {
        const double t = static_cast<double>(a[j]) * b[j];
        r.sum += t;
        r.size += std::abs(t);
    }
    return r;
}

std::array<Reference, sums> references(const Case& c)
{
    return {reference(c.d, c.u), reference(c.h, c.d), reference(c.h, c.u), reference(c.u, c.u),
            reference(c.h, c.h)};
}

/// Values of random sign with magnitudes in [2^(scale − spread − 1), 2^scale).
Values random_values(std::mt19937_64& rng, int scale, int spread)
{
    std::uniform_real_distribution<double> mantissa(0.5, 1.0);
    std::uniform_int_distribution<int> exponent(scale - spread, scale);
    Values v{};
    for (float& x : v) x = static_cast<float>((rng() % 2 == 0 ? 1 : -1) * std::ldexp(mantissa(rng), exponent(rng)));
    return v;
}

// Each of d, h and u at its own scale, 2^-120 to 2^120, with entries over 8
// binary orders of magnitude: within 12 roundings of float of the terms'
// sizes, where float products of the unscaled values would have lost
// everything (below 2^-149) or overflowed (above 2^128).
TEST(ScaledDots, MatchDoubleSumsAtEveryScale)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<int> scale(-120, 120);
    std::vector<Case> cases(2048);
    for (Case& c : cases) {
        const Values d = random_values(rng, scale(rng), 8), h = random_values(rng, scale(rng), 8);
        c = case_of(d, h, random_values(rng, scale(rng), 8));
    }
    const auto out = on_device(cases);
    const double rounding = 16.0 * std::ldexp(1.0, -24);
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto ref = references(cases[i]);
        for (int q = 0; q < sums; ++q) {
            ASSERT_LE(std::abs(out[i * sums + q] - ref[q].sum), rounding * ref[q].size)
                << "case " << i << ", sum " << q;
        }
    }
}

// Zeros give exact zeros; denormal entries (the largest below 2^-126) are
// scaled up like any others; entries near float's largest do not overflow.
TEST(ScaledDots, ZerosDenormalsAndTheLargestFloats)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::vector<Case> cases(3);
    cases[0] = Case{};
    cases[1] = case_of(random_values(rng, -130, 10), random_values(rng, -128, 12), random_values(rng, -127, 4));
    cases[2] = case_of(random_values(rng, 127, 3), random_values(rng, 127, 0), random_values(rng, 126, 2));
    const auto out = on_device(cases);
    for (int q = 0; q < sums; ++q) EXPECT_EQ(out[q], 0.0) << "sum " << q;
    for (std::size_t i = 1; i < cases.size(); ++i) {
        const auto ref = references(cases[i]);
        for (int q = 0; q < sums; ++q) {
            EXPECT_TRUE(std::isfinite(out[i * sums + q])) << "case " << i << ", sum " << q;
            EXPECT_LE(std::abs(out[i * sums + q] - ref[q].sum), 16.0 * std::ldexp(1.0, -24) * ref[q].size)
                << "case " << i << ", sum " << q;
        }
    }
}

// A NaN or an infinity in one vector makes every sum it enters non-finite
// (the guards of the scalar code then stop the frame), and leaves the
// others as they were.
TEST(ScaledDots, NonFiniteEntriesStayNonFinite)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<Case> cases;
    for (const float bad : {nan, inf, -inf}) {
        Case c = case_of(random_values(rng, 0, 4), random_values(rng, 0, 4), random_values(rng, 0, 4));
        c.h[5] = bad;
        cases.push_back(c);
        c = case_of(random_values(rng, 0, 4), random_values(rng, 0, 4), random_values(rng, 0, 4));
        c.u[11] = bad;
        cases.push_back(c);
    }
    const auto out = on_device(cases);
    // sums with h: hᵀd, hᵀu, hᵀh (1, 2, 4); with u: dᵀu, hᵀu, uᵀu (0, 2, 3)
    const std::array<bool, sums> with_h{false, true, true, false, true};
    const std::array<bool, sums> with_u{true, false, true, true, false};
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto& bad_in = i % 2 == 0 ? with_h : with_u;
        for (int q = 0; q < sums; ++q) {
            EXPECT_EQ(std::isfinite(out[i * sums + q]), !bad_in[q]) << "case " << i << ", sum " << q;
        }
    }
}

}  // namespace
}  // namespace recon::kernels::cuda
