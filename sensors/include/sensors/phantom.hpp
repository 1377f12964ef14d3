#pragma once
// Ellipse phantoms: the modified Shepp-Logan head and random ellipses,
// rasterized on an image grid and projected analytically.
//
// Coordinates. A phantom lives in normalized coordinates: its disc has
// radius 1, x points right, y points up (so the Shepp-Logan head is upright
// when image row 0 is drawn at the top). On an nx x ny grid the disc has
// radius R = min(nx, ny) / 2 pixels (max(nx, ny) / 2 for a 1-pixel-thin
// grid) and pixel (ix, iy) covers the unit square centred on
//     x = (ix - (nx - 1) / 2) / R,   y = -(iy - (ny - 1) / 2) / R.
// Values are attenuation per pixel length, so a line integral through the
// grid is in the units of A x for the system models (path lengths in pixels).

#include <cstdint>
#include <random>
#include <vector>

#include "recon/system_model.hpp"

namespace recon::sensors {

/// An ellipse adding `value` inside it (normalized coordinates).
struct Ellipse {
    double value = 0.0;  // added attenuation inside
    double a = 0.0;  // semi-axis along the ellipse's own x axis
    double b = 0.0;  // semi-axis along its own y axis
    double x0 = 0.0;  // centre
    double y0 = 0.0;
    double phi_deg = 0.0;  // rotation of the own x axis, counter-clockwise from x

    /// True when (x, y) lies inside (or on) the ellipse.
    bool contains(double x, double y) const;
};

/// A sum of ellipses.
struct Phantom {
    std::vector<Ellipse> ellipses;

    /// Sum of the values of the ellipses containing (x, y).
    double value_at(double x, double y) const;
    /// Every value multiplied by `factor`.
    Phantom scaled(double factor) const;
};

/// The modified Shepp-Logan phantom (Toft's higher-contrast variant, as in
/// MATLAB's phantom("Modified Shepp-Logan")): 10 ellipses; values 1 (skull),
/// 0.2 (brain), 0 (ventricles), 0.3 and up (small features).
Phantom shepp_logan();

/// `count` random ellipses inside the unit disc: one large body ellipse
/// (value 0.2-0.5) holding count - 1 features (semi-axes 0.04-0.3, values
/// 0.1-0.8, may overlap). Reproducible: a pure function of (count, seed).
Phantom random_ellipses(int count, std::uint64_t seed);

/// A frame-to-frame variation of a phantom: the whole phantom translated on
/// a slow closed path of amplitude `shift` (normalized units) with period
/// `period` frames, and every feature's value (all ellipses but the first)
/// scaled by 1 + `jitter` * u, u uniform in [-1, 1] drawn from `rng`.
Phantom vary(const Phantom& base, std::int64_t frame, double shift, double jitter, double period,
             std::mt19937_64& rng);

/// Radius R in pixels of the phantom's unit disc on an nx x ny grid.
double grid_radius(index_t nx, index_t ny);

/// The phantom sampled on the grid: each pixel is the mean of
/// supersample x supersample point samples inside it. Row-major [ny][nx].
std::vector<float> rasterize(const Phantom& phantom, index_t nx, index_t ny, int supersample = 4);

/// Exact integral of one ellipse along the ray x cos(angle) + y sin(angle)
/// = t, with pixel coordinates x = ix - (nx - 1) / 2 and y = (ny - 1) / 2 - iy
/// (y up while rows go down): the convention of recon::Parallel2d and of
/// skimage.transform.radon. Result in value x pixels.
double line_integral(const Ellipse& ellipse, index_t nx, index_t ny, double angle_deg, double t);
/// Sum over the phantom's ellipses.
double line_integral(const Phantom& phantom, index_t nx, index_t ny, double angle_deg, double t);

/// The exact sinogram [views][bins] of the phantom for a parallel2d geometry:
/// bin k at t = k - (bins - 1) / 2 - center_offset (the line integral at the
/// bin's centre, not its average over the bin width).
std::vector<float> analytic_sinogram(const Phantom& phantom, index_t nx, index_t ny, index_t bins,
                                     const std::vector<double>& angles_deg,
                                     double center_offset = 0.0);

}  // namespace recon::sensors
