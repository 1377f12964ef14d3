#pragma once
// Host side of the persistent CGNR solve of 2 to 4 frames on the normal
// matrix (normal_matrix_batch_cgnr.cu), for normal_matrix_cgnr.cu.

#include <cstddef>
#include <string>

#include "kernels/persistent.hpp"

namespace recon::kernels::cuda {

/// The most frames one launch of the batch kernel solves together.
constexpr int normal_matrix_batch_frames = 4;

/// Empty when the batch kernel can run on exec's device for `problem`'s
/// system (its other conditions checked by normal_matrix_cgnr_supports),
/// else why not.
std::string normal_matrix_batch_fits(const Executor& exec, const PersistentCgnrProblem& problem);

/// Floats of device workspace launch_normal_matrix_batch needs.
std::size_t normal_matrix_batch_workspace_floats();

/// Queues the whole solve of problem's 2 to 4 frames (one cooperative
/// launch, after a memset of the workspace) on exec.stream().
void launch_normal_matrix_batch(const Executor& exec, const PersistentCgnrProblem& problem,
                                float* workspace);

}  // namespace recon::kernels::cuda
