#pragma once
// Random numbers for the simulator that are the same with every standard
// library: std::mt19937_64 and std::seed_seq are fully specified, the
// std::*_distribution classes are not, so uniform and normal variates are
// formed here. (Poisson variates use std::poisson_distribution.)

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace recon::sensors {

/// A generator for one (seed, a, b) stream, e.g. (seed, sensor, frame).
inline std::mt19937_64 make_rng(std::uint64_t seed, std::uint64_t a, std::uint64_t b)
{
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                      static_cast<std::uint32_t>(a),    static_cast<std::uint32_t>(a >> 32),
                      static_cast<std::uint32_t>(b),    static_cast<std::uint32_t>(b >> 32)};
    return std::mt19937_64{seq};
}

/// Uniform in [lo, hi) from the top 53 bits of one draw.
inline double uniform(std::mt19937_64& rng, double lo, double hi)
{
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * u;
}

/// Standard normal variate (Box-Muller; one of the pair is used).
inline double standard_normal(std::mt19937_64& rng)
{
    const double u1 = 1.0 - uniform(rng, 0.0, 1.0);  // (0, 1]: log is finite
    const double u2 = uniform(rng, 0.0, 1.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace recon::sensors
