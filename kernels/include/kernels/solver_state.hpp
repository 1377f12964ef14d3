#pragma once
// Per-frame scalars of the CGNR iteration. They live in the executor's
// memory (device memory for CUDA) so that alpha and beta never travel to the
// host during a solve.

#include <cstdint>

namespace recon::kernels {

enum class SolveStatus : std::int32_t {
    running = 0,
    converged = 1,       // ‖g‖ ≤ tol · ‖Aᵀb‖
    max_iterations = 2,  // iteration limit reached
    breakdown = 3,       // f = dᵀe ≤ 0: the normal operator is not positive here
    non_finite = 4,      // NaN or Inf in a scalar: the frame's data is bad
};

const char* to_string(SolveStatus status);

struct CgnrScalars {
    double gd = 0;     // g_kᵀ d_k
    double f = 0;      // d_kᵀ e_k
    double ge = 0;     // g_{k+1}ᵀ e_k
    double gg = 0;     // ‖g‖²
    double gg0 = 0;    // ‖Aᵀb‖²: reference of the relative stop test (= ‖g_0‖² from x = 0)
    double alpha = 0;
    double beta = 0;
    std::int32_t iterations = 0;
    SolveStatus status = SolveStatus::running;
};

struct CgnrParams {
    std::int32_t max_iterations = 0;
    double tolerance = 0;  // relative to ‖g_0‖; 0: run max_iterations
};

}  // namespace recon::kernels
