#pragma once
// --device cpu | cuda | auto: which executor the pipeline runs on.

#include <string>

#include "kernels/executor.hpp"

namespace recon::pipeline {

/// The executor named by `device`: "cpu"; "cuda" (device 0, throws
/// std::runtime_error when this build has no CUDA backend or no device is
/// present); "auto" (CUDA when kernels::cuda_device_count() > 0, else CPU).
/// Throws std::invalid_argument for any other name.
kernels::Executor select_device(const std::string& device);

/// Sets the number of CPU threads a solve uses (0: leave the OpenMP default).
void set_cpu_threads(int threads);

}  // namespace recon::pipeline
