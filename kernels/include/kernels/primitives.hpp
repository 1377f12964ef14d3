#pragma once
// The compute primitives the solver is written in. Each dispatches on the
// executor's backend to kernels/cpu or kernels/cuda; see primitives.inc for
// what each computes.

#include "kernels/common.hpp"
#include "kernels/executor.hpp"
#include "kernels/regularizer_views.hpp"
#include "kernels/solver_state.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {
#include "kernels/primitives.inc"
}  // namespace recon::kernels
