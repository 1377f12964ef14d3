#pragma once
// Host side of the persistent CGNR solve on the normal matrix
// (normal_matrix_cgnr.cu), for persistent.cu.

#include <cstddef>
#include <string>

#include "kernels/persistent.hpp"

namespace recon::kernels::cuda {

/// Empty when the normal-matrix solve can run `problem` on exec's device
/// (its `normal_matrix` aside), else why not.
std::string normal_matrix_cgnr_supports(const Executor& exec, const PersistentCgnrProblem& problem);

/// Floats of device workspace launch_normal_matrix_cgnr needs.
std::size_t normal_matrix_workspace_floats(const PersistentCgnrProblem& problem);

/// Queues Aᵀb (a primitive) and the whole solve (one cooperative launch) on
/// exec.stream().
void launch_normal_matrix_cgnr(const Executor& exec, const PersistentCgnrProblem& problem,
                               float* workspace);

}  // namespace recon::kernels::cuda
