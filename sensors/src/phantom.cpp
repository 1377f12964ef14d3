#include "sensors/phantom.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "random.hpp"

namespace recon::sensors {

namespace {

constexpr double deg = std::numbers::pi / 180.0;

/// An ellipse in pixel units on the grid, y up (the normalized coordinates
/// scaled by the grid radius R).
struct GridEllipse {
    double value, a, b, xc, yc, phi;  // phi in radians
};

GridEllipse to_grid(const Ellipse& e, double radius)
{
    return {e.value, radius * e.a, radius * e.b, radius * e.x0, radius * e.y0, e.phi_deg * deg};
}

}  // namespace

bool Ellipse::contains(double x, double y) const
{
    const double dx = x - x0;
    const double dy = y - y0;
    const double c = std::cos(phi_deg * deg);
    const double s = std::sin(phi_deg * deg);
    const double u = (dx * c + dy * s) / a;
    const double v = (dy * c - dx * s) / b;
    return u * u + v * v <= 1.0;
}

double Phantom::value_at(double x, double y) const
{
    double sum = 0.0;
    for (const Ellipse& e : ellipses) {
        if (e.contains(x, y)) sum += e.value;
    }
    return sum;
}

Phantom Phantom::scaled(double factor) const
{
    Phantom out = *this;
    for (Ellipse& e : out.ellipses) e.value *= factor;
    return out;
}

Phantom shepp_logan()
{
    //        value    a       b       x0     y0      phi
    return {{{1.0, 0.69, 0.92, 0.0, 0.0, 0.0},
             {-0.8, 0.6624, 0.8740, 0.0, -0.0184, 0.0},
             {-0.2, 0.1100, 0.3100, 0.22, 0.0, -18.0},
             {-0.2, 0.1600, 0.4100, -0.22, 0.0, 18.0},
             {0.1, 0.2100, 0.2500, 0.0, 0.35, 0.0},
             {0.1, 0.0460, 0.0460, 0.0, 0.1, 0.0},
             {0.1, 0.0460, 0.0460, 0.0, -0.1, 0.0},
             {0.1, 0.0460, 0.0230, -0.08, -0.605, 0.0},
             {0.1, 0.0230, 0.0230, 0.0, -0.606, 0.0},
             {0.1, 0.0230, 0.0460, 0.06, -0.605, 0.0}}};
}

Phantom random_ellipses(int count, std::uint64_t seed)
{
    if (count < 1) {
        throw std::invalid_argument("random ellipses: count must be at least 1, found " +
                                    std::to_string(count));
    }
    std::mt19937_64 rng{seed};
    Phantom p;
    p.ellipses.push_back({uniform(rng, 0.2, 0.5), uniform(rng, 0.7, 0.9), uniform(rng, 0.75, 0.95),
                          0.0, 0.0, uniform(rng, 0.0, 180.0)});
    for (int k = 1; k < count; ++k) {
        const double r = 0.55 * std::sqrt(uniform(rng, 0.0, 1.0));
        const double theta = uniform(rng, 0.0, 2.0 * std::numbers::pi);
        Ellipse e;
        e.value = uniform(rng, 0.1, 0.8);
        e.a = uniform(rng, 0.04, 0.3);
        e.b = uniform(rng, 0.04, 0.3);
        e.x0 = r * std::cos(theta);
        e.y0 = r * std::sin(theta);
        e.phi_deg = uniform(rng, 0.0, 180.0);
        p.ellipses.push_back(e);
    }
    return p;
}

Phantom vary(const Phantom& base, std::int64_t frame, double shift, double jitter, double period,
             std::mt19937_64& rng)
{
    if (!(period > 0.0)) throw std::invalid_argument("phantom variation: period must be > 0");
    const double phase = 2.0 * std::numbers::pi * static_cast<double>(frame) / period;
    // A figure-of-eight path: smooth, closed, never standing still.
    const double dx = shift * std::sin(phase);
    const double dy = 0.5 * shift * std::sin(2.0 * phase);
    Phantom out = base;
    for (std::size_t k = 0; k < out.ellipses.size(); ++k) {
        Ellipse& e = out.ellipses[k];
        e.x0 += dx;
        e.y0 += dy;
        const double u = uniform(rng, -1.0, 1.0);
        if (k > 0) e.value *= 1.0 + jitter * u;
    }
    return out;
}

double grid_radius(index_t nx, index_t ny)
{
    const bool thin = nx == 1 || ny == 1;
    return 0.5 * static_cast<double>(thin ? std::max(nx, ny) : std::min(nx, ny));
}

std::vector<float> rasterize(const Phantom& phantom, index_t nx, index_t ny, int supersample)
{
    if (nx <= 0 || ny <= 0 || supersample <= 0) {
        throw std::invalid_argument("rasterize: grid " + std::to_string(nx) + " x " +
                                    std::to_string(ny) + " and supersampling " +
                                    std::to_string(supersample) + " must be positive");
    }
    const double radius = grid_radius(nx, ny);
    const double cx = 0.5 * (nx - 1);
    const double cy = 0.5 * (ny - 1);
    const double weight = 1.0 / (static_cast<double>(supersample) * supersample);
    std::vector<float> image(static_cast<std::size_t>(nx) * static_cast<std::size_t>(ny));
#pragma omp parallel for schedule(static)
    for (index_t iy = 0; iy < ny; ++iy) {
        for (index_t ix = 0; ix < nx; ++ix) {
            double sum = 0.0;
            for (int sy = 0; sy < supersample; ++sy) {
                const double gy = iy + (sy + 0.5) / supersample - 0.5 - cy;
                for (int sx = 0; sx < supersample; ++sx) {
                    const double gx = ix + (sx + 0.5) / supersample - 0.5 - cx;
                    sum += phantom.value_at(gx / radius, -gy / radius);
                }
            }
            image[static_cast<std::size_t>(iy) * nx + ix] = static_cast<float>(sum * weight);
        }
    }
    return image;
}

double line_integral(const Ellipse& ellipse, index_t nx, index_t ny, double angle_deg, double t)
{
    // Kak & Slaney (3.43): a line at distance t' from the centre, at angle
    // gamma to the ellipse's own x axis, cuts a chord of length
    // 2ab sqrt(a2 - t'^2) / a2 with a2 = a^2 cos^2 gamma + b^2 sin^2 gamma.
    const GridEllipse e = to_grid(ellipse, grid_radius(nx, ny));
    const double theta = angle_deg * deg;
    const double t_local = t - (e.xc * std::cos(theta) + e.yc * std::sin(theta));
    const double gamma = theta - e.phi;
    const double a2 = e.a * e.a * std::cos(gamma) * std::cos(gamma) +
                      e.b * e.b * std::sin(gamma) * std::sin(gamma);
    const double excess = a2 - t_local * t_local;
    if (excess <= 0.0) return 0.0;
    return e.value * 2.0 * e.a * e.b * std::sqrt(excess) / a2;
}

double line_integral(const Phantom& phantom, index_t nx, index_t ny, double angle_deg, double t)
{
    double sum = 0.0;
    for (const Ellipse& e : phantom.ellipses) sum += line_integral(e, nx, ny, angle_deg, t);
    return sum;
}

std::vector<float> analytic_sinogram(const Phantom& phantom, index_t nx, index_t ny, index_t bins,
                                     const std::vector<double>& angles_deg, double center_offset)
{
    if (bins <= 0) throw std::invalid_argument("analytic sinogram: bins must be positive");
    std::vector<float> sinogram(angles_deg.size() * static_cast<std::size_t>(bins));
    for (std::size_t v = 0; v < angles_deg.size(); ++v) {
        for (index_t k = 0; k < bins; ++k) {
            const double t = k - 0.5 * (bins - 1) - center_offset;
            sinogram[v * static_cast<std::size_t>(bins) + static_cast<std::size_t>(k)] =
                static_cast<float>(line_integral(phantom, nx, ny, angles_deg[v], t));
        }
    }
    return sinogram;
}

}  // namespace recon::sensors
