// Phantoms: Shepp-Logan values and orientation, rasterization mass, and the
// analytic line integral of an ellipse against numerical integration of
// its rasterized image.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "sensors/phantom.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

using sensors::Ellipse;
using sensors::Phantom;

/// Pixel value at normalized (x, y) (nearest pixel centre).
float pixel_at(const std::vector<float>& image, index_t nx, index_t ny, double x, double y)
{
    const double r = sensors::grid_radius(nx, ny);
    const auto ix = static_cast<std::size_t>(std::lround(x * r + 0.5 * (nx - 1)));
    const auto iy = static_cast<std::size_t>(std::lround(0.5 * (ny - 1) - y * r));
    return image[iy * static_cast<std::size_t>(nx) + ix];
}

TEST(Phantom, SheppLoganValuesAndOrientation)
{
    const Phantom p = sensors::shepp_logan();
    EXPECT_EQ(p.ellipses.size(), 10u);
    struct Point {
        double x, y, value;
    };
    const std::vector<Point> points = {
        {0.0, 0.0, 0.2},  {0.0, 0.35, 0.3},   {0.22, 0.0, 0.0}, {-0.22, 0.0, 0.0},
        {0.0, 0.89, 1.0}, {0.0, -0.906, 1.0}, {0.95, 0.0, 0.0}, {0.0, -0.1, 0.3},
        {0.0, 0.08, 0.3}, {0.0, -0.606, 0.3}, {0.5, 0.5, 0.2},  {-0.68, 0.0, 1.0},
    };
    const index_t n = 256;  // the skull is 3.5 pixels thick at the bottom
    const auto image = sensors::rasterize(p, n, n, 4);
    for (const Point& q : points) {
        SCOPED_TRACE(::testing::Message() << "(" << q.x << ", " << q.y << ")");
        EXPECT_NEAR(p.value_at(q.x, q.y), q.value, 1e-12);
        EXPECT_NEAR(pixel_at(image, n, n, q.x, q.y), q.value, 1e-6);
    }
    // Upright: the 0.3 blob at y = +0.35 lies in the upper half (small rows).
    const std::size_t row_above = static_cast<std::size_t>(std::lround(0.5 * (n - 1) - 0.35 * 128));
    EXPECT_NEAR(image[row_above * n + n / 2], 0.3, 1e-6);
    const std::size_t row_below = static_cast<std::size_t>(std::lround(0.5 * (n - 1) + 0.35 * 128));
    EXPECT_NEAR(image[row_below * n + n / 2], 0.2, 1e-6);
}

TEST(Phantom, RasterizedMassMatchesEllipseAreas)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    for (const Phantom& p : {sensors::shepp_logan(), sensors::random_ellipses(6, seed)}) {
        const index_t nx = 120, ny = 100;
        const double r = sensors::grid_radius(nx, ny);
        EXPECT_EQ(r, 50.0);
        double mass = 0.0;
        for (const Ellipse& e : p.ellipses) mass += e.value * std::numbers::pi * e.a * e.b * r * r;
        double sum = 0.0;
        for (float v : sensors::rasterize(p, nx, ny, 6)) sum += v;
        EXPECT_NEAR(sum, mass, 3e-3 * std::fabs(mass));
    }
}

/// Bilinear sample of an image at pixel position (px, py); 0 outside.
double bilinear(const std::vector<float>& image, index_t nx, index_t ny, double px, double py)
{
    const double fx = std::floor(px), fy = std::floor(py);
    const double wx = px - fx, wy = py - fy;
    double sum = 0.0;
    for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
            const auto ix = static_cast<long>(fx) + dx;
            const auto iy = static_cast<long>(fy) + dy;
            if (ix < 0 || iy < 0 || ix >= nx || iy >= ny) continue;
            sum += (dx ? wx : 1 - wx) * (dy ? wy : 1 - wy) *
                   image[static_cast<std::size_t>(iy) * static_cast<std::size_t>(nx) +
                         static_cast<std::size_t>(ix)];
        }
    }
    return sum;
}

/// Numerical integral of the image along x cos(a) + y sin(a) = t (y up).
double numeric_line_integral(const std::vector<float>& image, index_t nx, index_t ny,
                             double angle_deg, double t)
{
    const double a = angle_deg * std::numbers::pi / 180.0;
    const double c = std::cos(a), s = std::sin(a);
    const double step = 0.02;
    const double half = std::hypot(nx, ny);
    double sum = 0.0;
    for (double u = -half; u <= half; u += step) {
        const double x = t * c - u * s;
        const double y = t * s + u * c;
        sum += bilinear(image, nx, ny, x + 0.5 * (nx - 1), 0.5 * (ny - 1) - y);
    }
    return sum * step;
}

TEST(Phantom, EllipseLineIntegralMatchesTheRasterizedEllipse)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<double> u{0.0, 1.0};
    const index_t nx = 90, ny = 70;
    Ellipse e;
    e.value = 0.5 + u(rng);
    e.a = 0.2 + 0.5 * u(rng);
    e.b = 0.2 + 0.5 * u(rng);
    e.x0 = 0.3 * (u(rng) - 0.5);
    e.y0 = 0.3 * (u(rng) - 0.5);
    e.phi_deg = 180.0 * u(rng);
    const auto image = sensors::rasterize(Phantom{{e}}, nx, ny, 8);
    const double r = sensors::grid_radius(nx, ny);
    double err2 = 0.0, ref2 = 0.0;
    for (int k = 0; k < 24; ++k) {
        // Lines through the ellipse at least 3 pixels from tangency (where
        // the rasterized edge blurs the chord), or 3 pixels clear of it.
        const double angle = 360.0 * u(rng);
        const double a = angle * std::numbers::pi / 180.0;
        const double g = a - e.phi_deg * std::numbers::pi / 180.0;
        const double half = r * std::hypot(e.a * std::cos(g), e.b * std::sin(g));
        const double centre = r * (e.x0 * std::cos(a) + e.y0 * std::sin(a));
        const double t = k % 4 == 3 ? centre + (half + 3.0 + 5.0 * u(rng)) * (k % 8 == 3 ? 1 : -1)
                                    : centre + (half - 3.0) * (2.0 * u(rng) - 1.0);
        const double exact = sensors::line_integral(e, nx, ny, angle, t);
        const double numeric = numeric_line_integral(image, nx, ny, angle, t);
        // Pixelated edges alias: each crossing may be off by up to half a pixel.
        EXPECT_NEAR(numeric, exact, 1.0 * e.value) << "angle " << angle << " t " << t;
        if (k % 4 == 3)
            EXPECT_EQ(exact, 0.0);
        else
            EXPECT_GT(exact, 0.0);
        err2 += (numeric - exact) * (numeric - exact);
        ref2 += exact * exact;
    }
    EXPECT_LT(std::sqrt(err2 / ref2), 0.01);
}

TEST(Phantom, CircleChordIsExactAndProjectionsKeepTheMass)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<double> u{0.0, 1.0};
    const index_t nx = 64, ny = 64;
    const double r = 32.0;
    const Ellipse circle{0.7, 0.4, 0.4, 0.2, -0.1, 180.0 * u(rng)};
    for (int k = 0; k < 20; ++k) {
        const double angle = 360.0 * u(rng);
        const double t = 30.0 * (2.0 * u(rng) - 1.0);
        const double a = angle * std::numbers::pi / 180.0;
        const double d = t - r * (0.2 * std::cos(a) - 0.1 * std::sin(a));
        const double rr = 0.4 * r;
        const double chord = d * d < rr * rr ? 2.0 * std::sqrt(rr * rr - d * d) : 0.0;
        EXPECT_NEAR(sensors::line_integral(circle, nx, ny, angle, t), 0.7 * chord, 1e-9);
    }
    // Summing a projection over fine bins gives value x area at any angle.
    const Phantom p = sensors::random_ellipses(5, seed);
    double mass = 0.0;
    for (const Ellipse& e : p.ellipses) mass += e.value * std::numbers::pi * e.a * e.b * r * r;
    for (int k = 0; k < 5; ++k) {
        const double angle = 180.0 * u(rng);
        double sum = 0.0;
        const double dt = 0.05;
        for (double t = -50.0; t <= 50.0; t += dt)
            sum += sensors::line_integral(p, nx, ny, angle, t) * dt;
        EXPECT_NEAR(sum, mass, 1e-3 * mass) << "angle " << angle;
    }
}

TEST(Phantom, RandomEllipsesAreReproducibleAndInside)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    const Phantom a = sensors::random_ellipses(9, seed);
    const Phantom b = sensors::random_ellipses(9, seed);
    const Phantom c = sensors::random_ellipses(9, seed + 1);
    ASSERT_EQ(a.ellipses.size(), 9u);
    EXPECT_EQ(sensors::rasterize(a, 32, 32), sensors::rasterize(b, 32, 32));
    EXPECT_NE(sensors::rasterize(a, 32, 32), sensors::rasterize(c, 32, 32));
    for (double angle = 0; angle < 360; angle += 10) {
        const double x = std::cos(angle * std::numbers::pi / 180.0);
        const double y = std::sin(angle * std::numbers::pi / 180.0);
        EXPECT_EQ(a.value_at(1.001 * x, 1.001 * y), 0.0);
    }
    for (const Ellipse& e : a.ellipses) EXPECT_GT(e.value, 0.0);
    expect_error([] { (void)sensors::random_ellipses(0, 1); }, {"at least 1"});
    expect_error([] { (void)sensors::rasterize(Phantom{}, 0, 4); }, {"must be positive"});
}

TEST(Phantom, VariationMovesAndJittersWithinBounds)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Phantom base = sensors::shepp_logan();
    const Phantom still = sensors::vary(base, 0, 0.05, 0.1, 32.0, rng);
    const Phantom moved = sensors::vary(base, 8, 0.05, 0.1, 32.0, rng);
    EXPECT_EQ(still.ellipses[0].x0, base.ellipses[0].x0);  // phase 0: no shift
    EXPECT_EQ(still.ellipses[0].value, base.ellipses[0].value);  // the body keeps its value
    EXPECT_NEAR(moved.ellipses[3].x0 - base.ellipses[3].x0, 0.05, 1e-12);  // quarter period
    for (std::size_t k = 1; k < base.ellipses.size(); ++k) {
        EXPECT_LE(std::fabs(moved.ellipses[k].value / base.ellipses[k].value - 1.0), 0.1 + 1e-12);
    }
}

}  // namespace
}  // namespace recon::test
