#pragma once
// The whole CGNR solve (DESIGN §3, both forms) in one persistent cooperative
// kernel: one block per SM, grid-wide syncs only where the row pass needs
// every block's contribution.
//
// Layout of the work: each block owns a contiguous range of rows of A (as
// many kept in shared memory as fit); it scatters its rows' share of
// Aᵀ(·) into an image in shared memory (fixed-point integer adds, see
// persistent.cu) and adds it once to a global image; after one grid sync
// every block reads the complete image and performs the image-space part
// of the iteration (regularizer stencils, dot products, α, β, the x/h/g/d
// updates) redundantly and identically on its own copy of the image-space
// vectors in shared memory and registers (a batch's frames interleaved
// pixel by pixel). So the fused form costs one grid sync per iteration and
// CGLS1 two; within a block, the dot products take one block reduction per
// iteration without a regularizer (β from sums taken before the step,
// cgnr_scalars_end_expanded) and two otherwise. This needs the images of
// the batch to fit in one block: see persistent_cgnr_supports(). A launch
// takes up to 4 frames (4 slots per pixel); larger batches run as
// consecutive launches of 4 frames (persistent_chunks).
//
// Where A has few columns (n ≤ 3,072) the normal matrix G = AᵀA itself fits
// on chip, spread over the blocks' registers and shared memory (24 rows of
// G per block: 36 MB for paper_large's n = 3,000 over 125 SMs). Then the
// fused form without a regularizer iterates on G instead of A
// (persistent_normal_matrix_applies): each block multiplies its rows of G
// by d; one frame exchanges only its rows of u = G d per iteration, one
// grid sync, and a batch of 2 to 4 frames shares each pass over G, its
// blocks exchanging their shares of the dot products and their elements
// of d, two grid syncs (normal_matrix_cgnr.cu, normal_matrix_batch_cgnr.cu).
// The gradient at the start and at each residual replacement still comes
// from the rows of A, Aᵀ(A x − b), so the solution is as accurate as on
// the rows.

#include <string>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/executor.hpp"
#include "kernels/regularizer_views.hpp"
#include "kernels/solver_state.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {

/// The solver's buffers (device memory of one executor, borrowed) and
/// settings. Vectors hold `batch` frames back to back.
struct PersistentCgnrProblem {
    SystemView system;
    RegularizerTerms terms;
    ImageGrid grid;
    CgnrParams params;
    bool cgls1 = false;            // CGLS1 form (r kept, h = Aᵀr); else fused
    int residual_replacement = 0;  // fused form: h = Aᵀ(Ax − b) every K iterations; 0: never
    int batch = 1;
    /// How the blocks' scattered images are combined each pass: false adds
    /// them into one global image with atomics (one grid sync); true writes
    /// them out and sums them in a second, distributed phase (two grid
    /// syncs, no atomics, the same order every run).
    bool two_phase_reduction = false;
    View<const float> b;  // [batch][m] measurements
    View<float> x;        // [batch][n] initial guess in, solution out
    View<float> r;        // [batch][m] residual A x − b (work and out)
    View<float> q;        // [batch][m] A d (CGLS1 only; may be empty otherwise)
    View<float> h;        // [batch][n] Aᵀ r at the end
    View<float> g;        // [batch][n] gradient at the end (may equal h)
    View<float> d;        // [batch][n] direction at the end
    View<CgnrScalars> scalars;  // [batch]
    /// The normal matrix AᵀA, [n][n] row by row, when the solve iterates on
    /// it (persistent_normal_matrix_applies); empty: on the rows of A.
    View<const float> normal_matrix;
};

/// The most frames one launch of the persistent kernel solves together.
constexpr int persistent_max_frames = 4;

/// `problem` as consecutive launches: its frames in groups of
/// persistent_max_frames (the last one smaller), each group's buffers the
/// group's part of the problem's. One group when the batch fits a launch.
std::vector<PersistentCgnrProblem> persistent_chunks(const PersistentCgnrProblem& problem);

/// Whether the persistent solve of `problem` iterates on its normal matrix
/// AᵀA kept on chip (the caller then forms it and passes it in
/// `normal_matrix`): the fused form without a regularizer (any batch, in
/// launches of up to 4 frames), with n small enough for the device's SMs
/// to hold AᵀA, unless
/// RECON_PERSISTENT_ROWS names one way of treating the rows of A (`staged`,
/// `system` or `float`; `auto`, the default, takes the normal matrix where
/// this holds).
bool persistent_normal_matrix_applies(const Executor& exec, const PersistentCgnrProblem& problem);

/// Empty when the persistent kernel can solve `problem` on exec's device,
/// else the reason (e.g. the batch's images do not fit in shared memory).
std::string persistent_cgnr_supports(const Executor& exec, const PersistentCgnrProblem& problem);

}  // namespace recon::kernels
