#include "pipeline/quality.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace recon::pipeline {

namespace {

void check_sizes(const std::vector<float>& image, const std::vector<float>& truth)
{
    if (image.size() != truth.size() || truth.empty()) {
        throw std::invalid_argument{"quality: expected an image of " +
                                    std::to_string(truth.size()) +
                                    " pixels (the ground truth's), found " +
                                    std::to_string(image.size())};
    }
}

/// Summed-area table of a [ny][nx] field f, (ny+1) x (nx+1), in double.
std::vector<double> integral(const std::vector<double>& f, int ny, int nx)
{
    std::vector<double> s(static_cast<std::size_t>(ny + 1) * (nx + 1), 0.0);
    for (int y = 0; y < ny; ++y) {
        double row = 0.0;
        for (int x = 0; x < nx; ++x) {
            row += f[static_cast<std::size_t>(y) * nx + x];
            s[static_cast<std::size_t>(y + 1) * (nx + 1) + x + 1] =
                s[static_cast<std::size_t>(y) * (nx + 1) + x + 1] + row;
        }
    }
    return s;
}

/// Sum of f over the window rows [y0, y1), columns [x0, x1).
double window_sum(const std::vector<double>& s, int nx, int y0, int x0, int y1, int x1)
{
    const auto at = [&](int y, int x) { return s[static_cast<std::size_t>(y) * (nx + 1) + x]; };
    return at(y1, x1) - at(y0, x1) - at(y1, x0) + at(y0, x0);
}

}  // namespace

double data_range(const std::vector<float>& truth)
{
    if (truth.empty()) throw std::invalid_argument{"quality: empty ground truth"};
    const auto [lo, hi] = std::minmax_element(truth.begin(), truth.end());
    return static_cast<double>(*hi) - static_cast<double>(*lo);
}

double psnr(const std::vector<float>& image, const std::vector<float>& truth)
{
    check_sizes(image, truth);
    const double range = data_range(truth);
    if (!(range > 0.0)) {
        throw std::invalid_argument{"quality: ground truth is constant (data range 0)"};
    }
    double sum = 0.0;
    for (std::size_t i = 0; i < truth.size(); ++i) {
        const double d = static_cast<double>(image[i]) - truth[i];
        sum += d * d;
    }
    const double mse = sum / static_cast<double>(truth.size());
    if (mse == 0.0) return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(range * range / mse);
}

double ssim(const std::vector<float>& image, const std::vector<float>& truth,
            recon::ImageShape shape)
{
    check_sizes(image, truth);
    const int ny = shape.ny;
    const int nx = shape.nx;
    constexpr int win = 7;
    constexpr int half = win / 2;
    if (static_cast<std::size_t>(shape.size()) != truth.size()) {
        throw std::invalid_argument{"quality: expected " + std::to_string(shape.size()) +
                                    " pixels for a " + std::to_string(ny) + " x " +
                                    std::to_string(nx) + " image, found " +
                                    std::to_string(truth.size())};
    }
    if (ny < win || nx < win) {
        throw std::invalid_argument{"quality: SSIM needs an image of at least 7 x 7, found " +
                                    std::to_string(ny) + " x " + std::to_string(nx)};
    }
    const double range = data_range(truth);
    const double c1 = (0.01 * range) * (0.01 * range);
    const double c2 = (0.03 * range) * (0.03 * range);
    const double np = win * win;
    const double cov_norm = np / (np - 1.0);  // sample covariance

    const std::size_t n = truth.size();
    std::vector<double> x(n), y(n), xx(n), yy(n), xy(n);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = image[i];
        y[i] = truth[i];
        xx[i] = x[i] * x[i];
        yy[i] = y[i] * y[i];
        xy[i] = x[i] * y[i];
    }
    const auto sx = integral(x, ny, nx), sy = integral(y, ny, nx);
    const auto sxx = integral(xx, ny, nx), syy = integral(yy, ny, nx);
    const auto sxy = integral(xy, ny, nx);

    double total = 0.0;
    for (int r = half; r < ny - half; ++r) {
        for (int c = half; c < nx - half; ++c) {
            const auto mean = [&](const std::vector<double>& s) {
                return window_sum(s, nx, r - half, c - half, r + half + 1, c + half + 1) / np;
            };
            const double ux = mean(sx), uy = mean(sy);
            const double vx = cov_norm * (mean(sxx) - ux * ux);
            const double vy = cov_norm * (mean(syy) - uy * uy);
            const double vxy = cov_norm * (mean(sxy) - ux * uy);
            total += ((2.0 * ux * uy + c1) * (2.0 * vxy + c2)) /
                     ((ux * ux + uy * uy + c1) * (vx + vy + c2));
        }
    }
    return total / (static_cast<double>(ny - 2 * half) * (nx - 2 * half));
}

Quality measure_quality(const std::vector<float>& image, const std::vector<float>& truth,
                        recon::ImageShape shape)
{
    Quality q;
    q.psnr_db = psnr(image, truth);
    if (shape.ny >= 7 && shape.nx >= 7) q.ssim = ssim(image, truth, shape);
    return q;
}

}  // namespace recon::pipeline
