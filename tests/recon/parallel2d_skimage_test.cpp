// The parallel2d convention against scikit-image's radon transform
// (DESIGN §4): same angles, same detector order, same rotation sense.
// Skipped when Debian's python3 with scikit-image is not installed.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "recon/system_model.hpp"
#include "temp_dir.hpp"
#include "test_utils.hpp"

namespace recon {
namespace {

namespace fs = std::filesystem;

bool have_skimage()
{
    return std::system("/usr/bin/python3 -c 'import skimage.transform' > /dev/null 2>&1") == 0;
}

/// A smooth, asymmetric, off-centre object inside the inscribed circle,
/// sampled on pixels around a rotation axis at pixel index `c`.
std::vector<float> test_image(int n, double c)
{
    std::vector<float> image(static_cast<std::size_t>(n) * n);
    for (int iy = 0; iy < n; ++iy) {
        for (int ix = 0; ix < n; ++ix) {
            const double x = (ix - c) / n, y = (iy - c) / n;
            image[iy * n + ix] = static_cast<float>(
                std::exp(-((x - 0.15) * (x - 0.15) / 0.004 + (y + 0.1) * (y + 0.1) / 0.012)) +
                0.5 * std::exp(-((x + 0.12) * (x + 0.12) + (y - 0.18) * (y - 0.18)) / 0.003));
        }
    }
    return image;
}

std::vector<float> skimage_sinogram(const std::vector<float>& image, int n,
                                    const std::vector<double>& angles)
{
    const test::TempDir scratch;
    const fs::path& dir = scratch.path();
    {
        std::ofstream out{dir / "image.f32", std::ios::binary};
        out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size() * 4));
    }
    std::string list;
    for (double a : angles) {
        if (!list.empty()) list += ',';
        list += std::to_string(a);
    }
    const std::string script = std::string{RECON_TEST_SOURCE_DIR} + "/reference/radon_skimage.py";
    const std::string cmd = "/usr/bin/python3 " + script + " " + (dir / "image.f32").string() + " " +
                            std::to_string(n) + " " + list + " " + (dir / "sino.f32").string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> sino(angles.size() * n);
    std::ifstream in{dir / "sino.f32", std::ios::binary};
    in.read(reinterpret_cast<char*>(sino.data()), static_cast<std::streamsize>(sino.size() * 4));
    return sino;
}

/// The largest relative 2-norm difference over the views.
double worst_view_error(int n, double center_offset)
{
    const std::vector<double> angles{0.0, 17.0, 45.0, 90.0, 123.0, 160.0};
    // The same object about each one's axis: ours at (n-1)/2, scikit-image's
    // at pixel n/2 (integer division), which differ by half a pixel for even n.
    const auto image = test_image(n, (n - 1) / 2.0);
    const Parallel2d model{n, n, n, angles, center_offset};
    std::vector<float> ours(model.rows());
    model.apply(Executor::cpu(), test::cview_of(image), test::view_of(ours));
    const auto theirs = skimage_sinogram(test_image(n, n / 2), n, angles);
    double worst = 0.0;
    for (std::size_t v = 0; v < angles.size(); ++v) {
        const std::vector<float> a(ours.begin() + v * n, ours.begin() + (v + 1) * n);
        const std::vector<float> b(theirs.begin() + v * n, theirs.begin() + (v + 1) * n);
        worst = std::max(worst, test::rel_error(a, b));
    }
    return worst;
}

TEST(Parallel2dSkimage, OddSizeAgreesWithRadon)
{
    if (!have_skimage()) GTEST_SKIP() << "/usr/bin/python3 with scikit-image not installed";
    EXPECT_LT(worst_view_error(65, 0.0), 0.02);
}

TEST(Parallel2dSkimage, EvenSizeAgreesWithHalfBinOffset)
{
    if (!have_skimage()) GTEST_SKIP() << "/usr/bin/python3 with scikit-image not installed";
    // scikit-image's detector centre is bin N/2, half a bin past ours.
    EXPECT_LT(worst_view_error(64, 0.5), 0.02);
    // The wrong sign is a whole bin off: far outside interpolation error.
    EXPECT_GT(worst_view_error(64, -0.5), 0.1);
}

}  // namespace
}  // namespace recon
