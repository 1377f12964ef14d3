#pragma once
// Helpers for the GPU suites: skip without a device, move data between the
// host and the device, poison outputs.

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernels/executor.hpp"
#include "kernels/memory.hpp"
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

}  // namespace recon::test
