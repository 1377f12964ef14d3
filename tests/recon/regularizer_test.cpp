// Regularizers: each F against finite differences of its R, symmetry of the
// lagged operator, and the parser's errors.

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/primitives.hpp"
#include "recon/regularizer.hpp"
#include "test_utils.hpp"

namespace recon {
namespace {

using kernels::Executor;
using kernels::ImageGrid;
using test::cview_of;
using test::view_of;

/// F(p, v) on the CPU for one frame.
std::vector<float> apply_f(const Regularizer& reg, ImageGrid grid, const std::vector<float>& p,
                           const std::vector<float>& v)
{
    const Executor cpu = Executor::cpu();
    std::vector<float> state(std::max<kernels::size_type>(1, kernels::regularizer_state_size(reg.terms(), grid, 1)));
    kernels::regularizer_prepare(cpu, reg.terms(), grid, 1, cview_of(p), view_of(state));
    const std::vector<float> zero(v.size(), 0.0f);
    std::vector<float> out(v.size(), NAN);
    kernels::regularizer_apply_add(cpu, reg.terms(), grid, 1, cview_of(state), cview_of(zero),
                                   cview_of(v), view_of(out));
    return out;
}

/// Random image whose entries keep |x| ≥ 0.2, so the sign masks do not
/// change within the finite-difference step.
std::vector<float> image_away_from_zero(std::size_t n, std::mt19937_64& rng)
{
    auto x = test::random_vector(n, rng, 0.2f, 1.0f);
    std::bernoulli_distribution sign{0.5};
    for (auto& v : x) v = sign(rng) ? v : -v;
    return x;
}

class RegularizerGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(RegularizerGradient, FofXXIsTheGradientOfR)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const ImageGrid grid{23, 17};
    const Regularizer reg = Regularizer::parse(GetParam(), 0.3);
    const auto x = image_away_from_zero(grid.size(), rng);
    const auto v = test::random_vector(grid.size(), rng);
    const auto grad = apply_f(reg, grid, x, x);

    const double h = 1e-4;
    std::vector<double> xp(x.begin(), x.end()), xm(x.begin(), x.end());
    for (std::size_t i = 0; i < x.size(); ++i) {
        xp[i] += h * v[i];
        xm[i] -= h * v[i];
    }
    const double fd = (reg.value(xp, grid) - reg.value(xm, grid)) / (2 * h);
    const double analytic = test::dot(v, grad);
    EXPECT_NEAR(analytic, fd, 1e-4 * std::max(1.0, std::abs(fd))) << GetParam();
}

TEST_P(RegularizerGradient, LaggedOperatorIsSymmetricAndPositive)
{
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const ImageGrid grid{31, 9};
    const Regularizer reg = Regularizer::parse(GetParam(), 0.05);
    const auto p = image_away_from_zero(grid.size(), rng);
    const auto v = test::random_vector(grid.size(), rng);
    const auto w = test::random_vector(grid.size(), rng);
    const auto fv = apply_f(reg, grid, p, v);
    const auto fw = apply_f(reg, grid, p, w);
    EXPECT_NEAR(test::dot(fv, w), test::dot(v, fw), 1e-5 * test::norm(fv) * test::norm(w));
    EXPECT_GE(test::dot(v, fv), -1e-6 * test::norm(v) * test::norm(fv));
}

INSTANTIATE_TEST_SUITE_P(EveryTerm, RegularizerGradient,
                         ::testing::Values("tikhonov:0.7", "laplacian:1.3", "tv:0.9", "nonneg:2.5",
                                           "nonpos:4", "tv:0.5,nonneg:3,tikhonov:0.1"));

TEST(Regularizer, TvMatchesItsFormulaOnAHandCheckedImage)
{
    // 2 x 2 image [[0, 3], [4, 0]], eps = 0: R = |(3, 4)| + |(-3, 0)| + |(0, -4)| + 0 = 5 + 3 + 4.
    Regularizer reg;
    reg.add(RegularizerKind::tv, 2.0, 1e-9);
    EXPECT_NEAR(reg.value(std::vector<float>{0, 3, 4, 0}, ImageGrid{2, 2}), 2.0 * 12.0, 1e-6);
    Regularizer lap;
    lap.add(RegularizerKind::laplacian, 1.0);
    EXPECT_NEAR(lap.value(std::vector<float>{0, 3, 4, 0}, ImageGrid{2, 2}), 0.5 * (9 + 16 + 9 + 16), 1e-9);
}

TEST(Regularizer, ParsesAndDescribes)
{
    const auto reg = Regularizer::parse(" tv:0.01 , nonneg:10,laplacian:2", 0.001);
    ASSERT_EQ(reg.terms().count, 3);
    EXPECT_EQ(reg.terms().term[0].kind, RegularizerKind::tv);
    EXPECT_FLOAT_EQ(reg.terms().term[0].epsilon, 0.001f);
    EXPECT_FLOAT_EQ(reg.terms().term[1].weight, 10.0f);
    EXPECT_TRUE(Regularizer::parse("none").empty());
    EXPECT_TRUE(Regularizer::parse("").empty());
    EXPECT_EQ(Regularizer::parse("tikhonov:0.5").describe(), "tikhonov:0.5");
}

void expect_parse_error(const std::string& spec, const std::string& message)
{
    try {
        Regularizer::parse(spec);
        ADD_FAILURE() << "no error for '" << spec << "'";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string{e.what()}.find(message), std::string::npos)
            << "message: " << e.what();
    }
}

TEST(Regularizer, RejectsBadSpecsWithClearMessages)
{
    expect_parse_error("wavelet:1", "unknown regularizer 'wavelet'");
    expect_parse_error("tv:-0.1", "weight must be a finite number >= 0");
    expect_parse_error("tv:nan", "weight must be a finite number >= 0");
    expect_parse_error("tv", "expected name:weight");
    expect_parse_error("tv:abc", "is not a number");
    expect_parse_error("tikhonov:1,tikhonov:1,tikhonov:1,tikhonov:1,tikhonov:1,tikhonov:1,"
                       "tikhonov:1,tikhonov:1,tikhonov:1",
                       "at most 8 terms");
    EXPECT_THROW(Regularizer::parse("tv:1", 0.0), std::invalid_argument);  // eps must be > 0
}

}  // namespace
}  // namespace recon
