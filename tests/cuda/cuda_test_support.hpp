#pragma once
// Helpers for the GPU suites: skip without a device, move data between the
// host and the device, poison outputs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/executor.hpp"
#include "kernels/memory.hpp"
#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"
#include "recon/system_model.hpp"
#include "test_utils.hpp"

namespace recon::test {

/// Skips the calling test with a clear message when no GPU is present.
#define RECON_REQUIRE_GPU()                                                     \
    do {                                                                        \
        if (::recon::kernels::cuda_device_count() == 0) {                       \
            GTEST_SKIP() << "no CUDA device (this build or machine has no GPU)"; \
        }                                                                       \
    } while (false)

constexpr float poison = std::numeric_limits<float>::quiet_NaN();

inline kernels::Executor gpu() { return kernels::Executor::cuda(0); }

/// A parallel-beam system of 64 x 32 pixels, 23 views of 71 bins: one frame
/// takes the mirrored tiles' kernels, and its last ray passes the image's
/// corner (1,633 rows: in ranges of 32, the persistent kernel's block 51
/// holds that row alone).
inline Parallel2d small_parallel_beam()
{
    std::vector<double> angles;
    for (int k = 0; k < 23; ++k) angles.push_back(0.4 + 180.0 * k / 23);
    return Parallel2d{64, 32, 71, angles, 0.0};
}

template <class T>
kernels::Array<T> upload(const std::vector<T>& host)
{
    return kernels::Array<T>{gpu(), host};
}

/// A device array of `size` elements, every one set to NaN.
inline kernels::Array<float> poisoned(std::size_t size)
{
    return upload(std::vector<float>(size, poison));
}

template <class T>
kernels::View<const T> cview(const kernels::Array<T>& a)
{
    return {a.data(), a.size()};
}

/// Every element written (finite) and within `tol` relative of `want`.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " not written";
    }
    EXPECT_LE(rel_error(got, want), tol) << what;
}

/// The solver's images after its last solve, and the per-frame results.
inline std::pair<std::vector<float>, std::vector<FrameResult>> images_and_results(
    CgnrSolver& solver)
{
    const kernels::Executor& exec = solver.executor();
    std::vector<float> x(static_cast<std::size_t>(solver.image().size));
    kernels::copy(kernels::Executor::cpu(),
                  kernels::View<float>{x.data(), static_cast<kernels::size_type>(x.size())}, exec,
                  kernels::View<const float>{solver.image().data, solver.image().size});
    exec.synchronize();
    return {x, solver.results()};
}

/// Writes b ([batch][m]) into the solver's input and x0 ([batch][n]; empty:
/// zeros) into its image, solves, and returns the images and the per-frame
/// results.
inline std::pair<std::vector<float>, std::vector<FrameResult>> solve_frames(
    CgnrSolver& solver, const std::vector<float>& b, const std::vector<float>& x0 = {})
{
    const kernels::Executor& exec = solver.executor();
    kernels::copy(exec, solver.input(), kernels::Executor::cpu(),
                  kernels::View<const float>{b.data(), static_cast<kernels::size_type>(b.size())});
    if (x0.empty()) {
        kernels::fill(exec, solver.image(), 0.0f);
    } else {
        kernels::copy(exec, solver.image(), kernels::Executor::cpu(),
                      kernels::View<const float>{x0.data(),
                                                 static_cast<kernels::size_type>(x0.size())});
    }
    solver.solve();
    return images_and_results(solver);
}

/// The scalars after a cooperative update-and-direction step (`got`)
/// against the same step as two launches (`want`), frame by frame: status,
/// iterations and α equal; ‖g‖² and β within the order of their sums in
/// double (the two forms split the elements over their blocks differently).
/// gᵀe cancels for random signs, so β's error scales with ‖g‖ ‖e‖ (e:
/// [frame][pixels]).
inline void expect_step_scalars_match(const std::vector<kernels::CgnrScalars>& got,
                                      const std::vector<kernels::CgnrScalars>& want,
                                      const std::vector<float>& e, std::size_t pixels)
{
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t b = 0; b < got.size(); ++b) {
        SCOPED_TRACE("frame " + std::to_string(b));
        EXPECT_EQ(got[b].status, want[b].status);
        EXPECT_EQ(got[b].iterations, want[b].iterations);
        EXPECT_EQ(got[b].alpha, want[b].alpha);
        EXPECT_NEAR(got[b].gg, want[b].gg, 1e-9 * want[b].gg);
        const double ee =
            norm(std::vector<float>(e.begin() + b * pixels, e.begin() + (b + 1) * pixels));
        EXPECT_NEAR(got[b].beta, want[b].beta,
                    1e-9 * std::sqrt(want[b].gg) * ee / std::abs(want[b].f));
    }
}

}  // namespace recon::test
