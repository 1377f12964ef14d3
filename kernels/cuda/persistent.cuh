#pragma once
// Host side of the persistent CGNR kernel (persistent.cu), for graph.cu.

#include <cstddef>

#include "kernels/persistent.hpp"

namespace recon::kernels::cuda {

/// Floats of device workspace launch_persistent_cgnr needs for `problem`
/// (one launch: at most persistent_max_frames frames).
std::size_t persistent_workspace_floats(const PersistentCgnrProblem& problem);

/// Queues the whole solve of at most persistent_max_frames frames on
/// exec.stream() (one cooperative launch).
void launch_persistent_cgnr(const Executor& exec, const PersistentCgnrProblem& problem,
                            float* workspace);

}  // namespace recon::kernels::cuda
