// PSNR and SSIM against hand values, a value from scikit-image, and a
// brute-force reference of the windowed SSIM on random images.

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/quality.hpp"

namespace recon::pipeline {
namespace {

std::vector<float> random_image(recon::ImageShape shape, std::mt19937& rng)
{
    std::uniform_real_distribution<float> u{0.0f, 1.0f};
    std::vector<float> v(static_cast<std::size_t>(shape.size()));
    for (auto& e : v) e = u(rng);
    return v;
}

/// SSIM straight from its definition: every 7 x 7 window summed directly.
double ssim_reference(const std::vector<float>& x, const std::vector<float>& y,
                      recon::ImageShape s, double range)
{
    const double c1 = std::pow(0.01 * range, 2), c2 = std::pow(0.03 * range, 2);
    double total = 0;
    int count = 0;
    for (int r = 3; r < s.ny - 3; ++r) {
        for (int c = 3; c < s.nx - 3; ++c) {
            double mx = 0, my = 0;
            for (int i = -3; i <= 3; ++i)
                for (int j = -3; j <= 3; ++j) {
                    mx += x[(r + i) * s.nx + c + j];
                    my += y[(r + i) * s.nx + c + j];
                }
            mx /= 49;
            my /= 49;
            double vx = 0, vy = 0, vxy = 0;
            for (int i = -3; i <= 3; ++i)
                for (int j = -3; j <= 3; ++j) {
                    const double dx = x[(r + i) * s.nx + c + j] - mx;
                    const double dy = y[(r + i) * s.nx + c + j] - my;
                    vx += dx * dx;
                    vy += dy * dy;
                    vxy += dx * dy;
                }
            vx /= 48;
            vy /= 48;
            vxy /= 48;
            total += (2 * mx * my + c1) * (2 * vxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2));
            ++count;
        }
    }
    return total / count;
}

TEST(Quality, PsnrOfAConstantOffsetIsKnown)
{
    std::mt19937 rng{std::random_device{}()};
    const recon::ImageShape shape{13, 17};
    auto truth = random_image(shape, rng);
    truth[0] = 0.0f;  // range exactly 1
    truth[1] = 1.0f;
    const float offset = std::uniform_real_distribution<float>{0.01f, 0.2f}(rng);
    std::vector<float> image = truth;
    for (auto& v : image) v += offset;
    // MSE = offset², range = 1: PSNR = -20 log10(offset).
    EXPECT_NEAR(psnr(image, truth), -20.0 * std::log10(double(offset)), 1e-4);
    EXPECT_TRUE(std::isinf(psnr(truth, truth)));
}

TEST(Quality, SsimOfIdenticalImagesIsOne)
{
    std::mt19937 rng{std::random_device{}()};
    const recon::ImageShape shape{20, 31};
    const auto truth = random_image(shape, rng);
    EXPECT_NEAR(ssim(truth, truth, shape), 1.0, 1e-12);
}

TEST(Quality, MatchesScikitImageOnAFixedExample)
{
    // skimage.metrics.structural_similarity(image, truth, data_range=1,
    // win_size=7) = -0.2062856578594949; peak_signal_noise_ratio(truth,
    // image, data_range=1) = 5.406051851375114.
    const recon::ImageShape shape{9, 8};
    std::vector<float> truth, image;
    for (int y = 0; y < 9; ++y) {
        for (int x = 0; x < 8; ++x) {
            truth.push_back(float((3 * y + 5 * x) % 7) / 6.0f);
            image.push_back(float((2 * y + x * x) % 5) / 4.0f);
        }
    }
    EXPECT_NEAR(ssim(image, truth, shape), -0.2062856578594949, 1e-6);
    EXPECT_NEAR(psnr(image, truth), 5.406051851375114, 1e-5);
}

TEST(Quality, SsimMatchesBruteForceOnRandomImages)
{
    std::mt19937 rng{std::random_device{}()};
    const recon::ImageShape shape{24, 19};
    const auto truth = random_image(shape, rng);
    auto image = truth;
    std::normal_distribution<float> noise{0.0f, 0.1f};
    for (auto& v : image) v += noise(rng);
    const double expected = ssim_reference(image, truth, shape, data_range(truth));
    EXPECT_NEAR(ssim(image, truth, shape), expected, 1e-9);
    EXPECT_LT(expected, 0.99);
}

TEST(Quality, BadInputsThrow)
{
    const recon::ImageShape small{5, 9};
    const std::vector<float> a(45, 1.0f);
    std::vector<float> b(45, 0.0f);
    b[3] = 1.0f;
    EXPECT_THROW((void)ssim(a, b, small), std::invalid_argument);             // under 7 x 7
    EXPECT_THROW((void)psnr(std::vector<float>(44), b), std::invalid_argument);  // sizes
    EXPECT_THROW((void)psnr(b, a), std::invalid_argument);  // constant truth: range 0
}

}  // namespace
}  // namespace recon::pipeline
