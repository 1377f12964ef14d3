// Raw counts to line integrals: the formula, clamping, the rules when dark
// or flat are missing, and dead cells.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sensors/preprocess.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

using sensors::counts_to_line_integrals;
using sensors::min_transmission;

TEST(Preprocess, BeerLambertWithDarkAndFlat)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    const std::size_t m = 257;
    const auto dark = random_vector(m, rng, 50.0f, 150.0f);
    const auto flat = random_vector(m, rng, 1.0e4f, 6.0e4f);
    const auto p_true = random_vector(m, rng, 0.0f, 6.0f);
    std::vector<float> counts(m);
    for (std::size_t i = 0; i < m; ++i)
        counts[i] = dark[i] + (flat[i] - dark[i]) * std::exp(-p_true[i]);
    const auto p = counts_to_line_integrals(counts, dark, flat);
    for (std::size_t i = 0; i < m; ++i) EXPECT_NEAR(p[i], p_true[i], 2e-4) << i;
    // In place.
    std::vector<float> in_place = counts;
    counts_to_line_integrals(in_place, dark, flat, in_place);
    EXPECT_EQ(in_place, p);
}

TEST(Preprocess, ClampsAndDeadCells)
{
    const float flat_level = 1000.0f + static_cast<float>(fresh_seed() % 1000);
    const std::vector<float> dark{10.0f, 10.0f, 10.0f, 10.0f, 10.0f};
    const std::vector<float> flat{flat_level, flat_level, 10.0f, 5.0f, flat_level};
    const std::vector<float> counts{5.0f, 10.0f, 500.0f, 500.0f, 2.0f * flat_level};
    const auto p = counts_to_line_integrals(counts, dark, flat);
    const float cap = -std::log(min_transmission);
    EXPECT_FLOAT_EQ(p[0], cap);  // below the dark level
    EXPECT_FLOAT_EQ(p[1], cap);  // at the dark level
    EXPECT_EQ(p[2], 0.0f);  // flat == dark: dead cell
    EXPECT_EQ(p[3], 0.0f);  // flat < dark
    EXPECT_LT(p[4], 0.0f);  // brighter than the flat: kept (noise), not clipped
    EXPECT_NEAR(p[4], -std::log((2.0 * flat_level - 10.0) / (flat_level - 10.0)), 1e-5);
}

TEST(Preprocess, MissingCalibrationUsesZeroDarkAndFrameMaximum)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto counts = random_vector(100, rng, 1.0f, 5.0e4f);
    const float top = *std::max_element(counts.begin(), counts.end());
    const auto p = counts_to_line_integrals(counts);
    const auto dark = random_vector(100, rng, 0.0f, 0.5f);
    const auto p_dark = counts_to_line_integrals(counts, dark, {});
    for (std::size_t i = 0; i < counts.size(); ++i) {
        EXPECT_NEAR(p[i], -std::log(counts[i] / top), 1e-5);
        EXPECT_NEAR(p_dark[i], -std::log((counts[i] - dark[i]) / (top - dark[i])), 1e-5);
    }
    EXPECT_EQ(*std::min_element(p.begin(), p.end()), 0.0f);
}

TEST(Preprocess, LengthsAreChecked)
{
    const std::vector<float> counts(4, 1.0f), three(3, 1.0f);
    expect_error([&] { (void)counts_to_line_integrals(counts, three, {}); },
                 {"dark has 3 values, expected 4"});
    expect_error([&] { (void)counts_to_line_integrals(counts, {}, three); },
                 {"flat has 3 values, expected 4"});
    std::vector<float> out(3);
    expect_error([&] { counts_to_line_integrals(counts, {}, {}, out); }, {"output has 3 values"});
}

}  // namespace
}  // namespace recon::test
