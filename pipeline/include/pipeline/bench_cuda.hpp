#pragma once
// The GPU tables of `recon bench` (DESIGN §8), timed with CUDA events on the
// executor's stream, medians after a warm-up:
//   (a) section "gpu operators": the founding paper's Table 2 today — A x
//       and Aᵀ y per variant (simple CSR, ELLPACK-T, shared memory, on the
//       fly, cuSPARSE CSR) and our fused Aᵀ(A d);
//   (b) section "gpu solve": per-image latency of 400 iterations for our
//       one-launch solves, our stream-launched primitives, cuSPARSE+cuBLAS
//       CGLS (host loop, one graph: the baseline of the ratios) and our CPU
//       path; the same for the CT problem of configs/ct-256.ini;
//   (c) section "gpu batch": batches of 1, 4 and 16 frames solved together,
//       against one graph instance per stream.
// Without CUDA these throw the backend's "no CUDA" error.

#include "kernels/executor.hpp"
#include "pipeline/bench.hpp"

namespace recon::pipeline {

/// Name of the baseline row of sections "gpu solve" and "gpu batch".
inline constexpr const char* cuda_solve_baseline = "cuSPARSE+cuBLAS CGLS, one graph";

void add_cuda_operator_rows(BenchTable& table, const BenchProblem& problem,
                            const kernels::Executor& exec, const BenchConfig& config);
void add_cuda_solve_rows(BenchTable& table, const BenchProblem& problem,
                         const kernels::Executor& exec, const BenchConfig& config);
/// parallel2d 256 x 256, 180 views over 180°, TV: on the fly against the
/// materialized matrix in cuSPARSE (problem name "ct_256").
void add_cuda_ct_rows(BenchTable& table, const kernels::Executor& exec, const BenchConfig& config);
/// B = 1, 4 and 16 frames solved together (one solver for the batch).
void add_cuda_batch_rows(BenchTable& table, const BenchProblem& problem,
                         const kernels::Executor& exec, const BenchConfig& config);
/// The same frames as one graph instance per stream, every stream at once.
void add_cuda_stream_batch_rows(BenchTable& table, const BenchProblem& problem,
                                const kernels::Executor& exec, const BenchConfig& config);

/// All of the above for the given problems, plus the ratio baselines; the
/// rows on many streams last (add_cuda_stream_batch_rows says why).
void add_cuda_rows(BenchTable& table, const std::vector<const BenchProblem*>& problems,
                   const kernels::Executor& exec, const BenchConfig& config);

}  // namespace recon::pipeline
