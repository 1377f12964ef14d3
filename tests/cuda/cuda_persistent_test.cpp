// The persistent kernel's ways of treating its rows (RECON_PERSISTENT_ROWS):
// `auto`, the default, iterates on the normal matrix AᵀA where it applies
// (one frame of the fused form without a regularizer, n ≤ 3,072) and
// otherwise stages the rows in shared memory with a fixed-point scatter;
// `staged` always does the latter; `system` reads the rows from the system
// every pass with the same scatter; `float` takes float atomics. Each
// against the double-precision reference on an ill-conditioned problem,
// against the host loop on a matrix with hundreds of rows per block, with
// a non-finite frame in a batch, and across 36 orders of magnitude of input
// scale (the fixed-point scale is chosen per block and pass). The normal
// matrix's own cases (the paper's sizes, warm starts, a replacement every
// iteration, a column in every row, which problems take it, and batches of
// 2 to 4 frames sharing its passes) are at the end.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_support.hpp"
#include "kernels/persistent.hpp"
#include "kernels/primitives.hpp"
#include "recon/cgnr.hpp"
#include "reference_problems.hpp"

namespace recon {
namespace {

using test::gpu;

/// Sets RECON_PERSISTENT_ROWS for the lifetime of the object.
struct RowsMode : test::ScopedEnv {
    explicit RowsMode(const std::string& mode) : ScopedEnv{"RECON_PERSISTENT_ROWS", mode} {}
};

using test::solve_frames;

using ModeForm = std::tuple<std::string, CgnrForm>;

class PersistentRows : public ::testing::TestWithParam<ModeForm> {
protected:
    std::string mode() const { return std::get<0>(GetParam()); }
    SolverOptions options() const
    {
        SolverOptions o;
        o.launch = SolveLaunch::persistent;
        o.form = std::get<1>(GetParam());
        return o;
    }

    struct Solutions {
        std::vector<float> x, x_ref;
        std::vector<FrameResult> res, res_ref;
    };
    /// b (`batch` frames) solved by the host loop (x_ref) and by this
    /// launch and rows mode (x): 12 iterations, few enough that the gradient
    /// is far above float noise, with a residual replacement every 5.
    Solutions against_host_loop(const SystemModel& model, const Regularizer& regularizer,
                                int batch, const std::vector<float>& b,
                                const std::vector<float>& x0 = {}) const
    {
        SolverOptions o = options();
        o.max_iterations = 12;
        o.residual_replacement = 5;
        SolverOptions host = o;
        host.launch = SolveLaunch::host_loop;
        Solutions out;
        CgnrSolver reference{model, regularizer, host, gpu(), batch};
        std::tie(out.x_ref, out.res_ref) = solve_frames(reference, b, x0);
        const RowsMode rows{mode()};
        CgnrSolver solver{model, regularizer, o, gpu(), batch};
        std::tie(out.x, out.res) = solve_frames(solver, b, x0);
        return out;
    }

    /// Every frame ran the 12 iterations to a gradient as small as the host
    /// loop's, and x is the host loop's up to float sums in other orders.
    static void expect_as_host_loop(const Solutions& s, int batch)
    {
        for (int f = 0; f < batch; ++f) {
            EXPECT_EQ(s.res[f].iterations, 12) << "frame " << f;
            // ‖g‖/‖Aᵀb‖ is near float noise here (1e-6 to 2e-4): as small
            // as the host loop's, give or take the noise, where the two are
            // two draws of it (not bit for bit the same from run to run: the
            // failing seed replayed gave other values). Over 21,120 frames
            // (60 runs of these tests, H200) the ratio reached 3.5: 2 went
            // past 3x + 1e-6, and the closest came to 2.96x + 1e-5. A wrong
            // β would stall far above it.
            EXPECT_LE(s.res[f].rel_gradient, 4.0 * s.res_ref[f].rel_gradient + 1e-5)
                << "frame " << f;
        }
        // a wrong scatter or scale would be off by O(1)
        EXPECT_LE(test::rel_error(s.x, s.x_ref), 1e-3);
    }
};

TEST_P(PersistentRows, ConvergesToTheDoublePrecisionLeastSquaresSolution)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    // ~30 dense rows per block: every column of a block's image sums ~30 terms.
    auto [csr, a] = test::ill_conditioned(4000, 150, 1e2, rng);
    const StoredMatrix model{std::move(csr)};
    const auto x_true = test::random_vector(150, rng);
    const auto noise = test::random_vector(4000, rng, -0.01f, 0.01f);
    const auto b = test::to_float(a * test::to_vec(x_true) + test::to_vec(noise));
    const test::Vec reference = a.colPivHouseholderQr().solve(test::to_vec(b));

    const RowsMode rows{mode()};
    SolverOptions o = options();
    o.max_iterations = 3000;
    o.tolerance = 1e-7;
    o.residual_replacement = 20;
    FrameResult result;
    const auto x = solve_cgnr(model, Regularizer{}, o, gpu(), b, {}, &result);
    EXPECT_EQ(result.status, SolveStatus::converged);
    EXPECT_LE(test::rel_error(x, reference), 1e-4) << "after " << result.iterations << " iterations";
}

TEST_P(PersistentRows, MatchesTheHostLoopWithHundredsOfRowsPerBlock)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{60000, 2000, 330000, seed};
    for (const int batch : {1, 3}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
        expect_as_host_loop(against_host_loop(model, Regularizer::parse("tikhonov:0.01"), batch, b),
                            batch);
    }
}

TEST_P(PersistentRows, NonFiniteFrameStopsAloneAndLeavesTheOthersExact)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{20000, 1000, 110000, seed};
    const std::size_t m = model.rows();
    const std::size_t n = model.cols();
    auto good = test::random_vector(2 * m, rng);
    auto bad = good;
    bad[m / 3] = std::numeric_limits<float>::quiet_NaN();  // frame 0 only
    SolverOptions o = options();
    o.max_iterations = 25;
    const RowsMode rows{mode()};
    CgnrSolver solver{model, Regularizer{}, o, gpu(), 2};
    const auto [x_good, res_good] = solve_frames(solver, good);
    const auto [x_bad, res_bad] = solve_frames(solver, bad);
    EXPECT_EQ(res_bad[0].status, SolveStatus::non_finite);
    EXPECT_EQ(res_bad[1].status, res_good[1].status);
    EXPECT_EQ(res_bad[1].iterations, 25);
    for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(x_bad[i])) << "pixel " << i;
    const std::vector<float> second_good(x_good.begin() + n, x_good.end());
    const std::vector<float> second_bad(x_bad.begin() + n, x_bad.end());
    EXPECT_LE(test::rel_error(second_bad, second_good), 1e-6);
}

TEST_P(PersistentRows, ScalesWithItsInputOverThirtySixOrdersOfMagnitude)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{30000, 1500, 165000, seed};
    const auto b = test::random_vector(model.rows(), rng);
    SolverOptions o = options();
    o.max_iterations = 30;
    const RowsMode rows{mode()};
    const auto x = solve_cgnr(model, Regularizer{}, o, gpu(), b);
    for (const float factor : {1e-18f, 1e18f}) {
        SCOPED_TRACE("factor " + std::to_string(factor));
        std::vector<float> scaled = b;
        for (float& v : scaled) v *= factor;
        FrameResult result;
        const auto xs = solve_cgnr(model, Regularizer{}, o, gpu(), scaled, {}, &result);
        EXPECT_EQ(result.iterations, 30);
        std::vector<float> back = xs;
        for (float& v : back) v /= factor;
        EXPECT_LE(test::rel_error(back, x), 1e-4);
    }
}

TEST_P(PersistentRows, MatchesTheHostLoopOnAStoredMatrixOrderedForBanks)
{
    RECON_REQUIRE_GPU();
    // A stored matrix of short rows: staged as the device's sliced ELL copy,
    // whose entries are reordered within their rows for the banks, in row
    // ranges aligned to its slices; the last block's range is partial.
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const StoredMatrix model{Synthetic{50000, 1800, 270000, seed}.materialize()};
    const int batch = 2;
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    const auto [x, x_ref, res, res_ref] = against_host_loop(model, Regularizer{}, batch, b);
    for (int f = 0; f < batch; ++f) EXPECT_EQ(res[f].iterations, 12) << "frame " << f;
    EXPECT_LE(test::rel_error(x, x_ref), 1e-3);
}

// Without a regularizer every batch takes the one-reduction step (β from
// sums taken before the step) in every iteration but those of the residual
// replacement; the host loop sums β over the new gradient. Batch 4 fills
// every slot of the interleaved images; one frame of 10,000 pixels takes
// the kernel's shape of 12 elements per thread.
TEST_P(PersistentRows, WithoutRegularizerMatchesTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{60000, 2000, 330000, seed};
    for (const int batch : {1, 4}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
        expect_as_host_loop(against_host_loop(model, Regularizer{}, batch, b), batch);
    }
    SCOPED_TRACE("one frame of 10,000 pixels");
    const Synthetic wide{150000, 10000, 800000, seed};
    const auto b = test::random_vector(static_cast<std::size_t>(wide.rows()), rng);
    expect_as_host_loop(against_host_loop(wide, Regularizer{}, 1, b), 1);
}

// Batches past one launch's 4 frames run as launches of 4 frames (and the
// rest) one after the other, each on its frames' part of the buffers and
// sharing one workspace: 6 = 4 + 2 and 9 = 4 + 4 + 1 (the 1-frame shape
// after the 4-frame one), without a regularizer and with one (x and its
// state in shared memory).
TEST_P(PersistentRows, LargerBatchesRunFourFramesAtATime)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{30000, 1500, 165000, seed};
    for (const int batch : {6, 9}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
        expect_as_host_loop(against_host_loop(model, Regularizer{}, batch, b), batch);
        expect_as_host_loop(against_host_loop(model, Regularizer::parse("tikhonov:0.01"), batch, b),
                            batch);
    }
}

// The paper's larger problem in a regularized batch of 4: the four frames'
// d, x and scatter images leave room (on an H100 or H200) for ~94 % of a
// block's rows in shared memory; the rest are read from the system in
// every pass.
TEST_P(PersistentRows, PartlyStagedRowsMatchTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{320000, 3000, 1800000, seed};
    const int batch = 4;
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    expect_as_host_loop(against_host_loop(model, Regularizer::parse("tikhonov:0.01"), batch, b),
                        batch);
}

// A warm start of a batch without a regularizer: the blocks' slices of x
// start from x0, and the residual passes gather x from them. Fewer rows
// than columns, so that x0's part in the null space of A stays in x.
TEST_P(PersistentRows, WarmStartedBatchMatchesTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{1000, 1500, 8000, seed};
    const int batch = 3;
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    const auto x0 = test::random_vector(static_cast<std::size_t>(model.cols()) * batch, rng);
    const auto [x, x_ref, res, res_ref] = against_host_loop(model, Regularizer{}, batch, b, x0);
    for (int f = 0; f < batch; ++f) EXPECT_EQ(res[f].iterations, 12) << "frame " << f;
    EXPECT_LE(test::rel_error(x, x_ref), 1e-3);
    // from x0, not from zeros: the null-space part of x0 differs by O(1)
    const auto [x_cold, x_cold_ref, res_cold, res_cold_ref] =
        against_host_loop(model, Regularizer{}, batch, b);
    EXPECT_GT(test::rel_error(x, x_cold), 1e-2);
}

// A normal operator with three distinct eigenvalues: CG's gradient falls to
// float noise at the third iteration, where the one-reduction step's
// expanded ‖g‖² cancels and β must be summed over the new gradient; the
// iterations after it walk in the noise. Both launches must stay at the
// least-squares solution and run to the limit.
TEST_P(PersistentRows, GradientCollapseInOneStepStaysAtTheSolution)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int m = 3000, n = 120;
    test::Vec sigma(n);
    for (int k = 0; k < n; ++k) sigma(k) = 1.0 + (k % 3);  // eigenvalues 1, 4, 9 of AᵀA
    auto [csr, a] = test::with_singular_values(m, sigma, rng);
    const StoredMatrix model{std::move(csr)};
    const auto b = test::random_vector(m, rng);
    const test::Vec reference = a.colPivHouseholderQr().solve(test::to_vec(b));
    SolverOptions o = options();
    o.max_iterations = 8;
    o.residual_replacement = 0;
    SolverOptions host = o;
    host.launch = SolveLaunch::host_loop;
    FrameResult res_ref, res;
    const auto x_ref = solve_cgnr(model, Regularizer{}, host, gpu(), b, {}, &res_ref);
    const RowsMode rows{mode()};
    const auto x = solve_cgnr(model, Regularizer{}, o, gpu(), b, {}, &res);
    EXPECT_EQ(res.status, res_ref.status);
    EXPECT_EQ(res.iterations, res_ref.iterations);
    EXPECT_LE(test::rel_error(x_ref, reference), 1e-5);
    EXPECT_LE(test::rel_error(x, reference), 1e-5);
}

// A parallel-beam system whose last block of rows holds one ray that
// misses the image: 23 views of 71 bins are 1,633 rows, in ranges of 32 a
// block (at least 52 SMs), so block 51 has row 1,632 alone, with no
// entries. Its staged rows were read at the widest unrolled width (6
// entries), past what was staged, into whatever the SM's shared memory
// held: zeros in a fresh process, after a TV solve an illegal address
// (docs/gpu-performance.md, history v50). So a TV solve runs first here,
// in three rounds on fresh data: what it leaves depends on its data, and
// one round caught the fault in 2 of 3 seeds.
// Without a regularizer this system amplifies rounding (a one-ulp change of
// b moves the host loop's x by up to 1.6e-3 after 12 iterations, H200), so
// the solve runs 4 iterations, where x keeps to ~3e-6 of the host loop's.
TEST_P(PersistentRows, ABlockOfRaysThatAllMissTheImageMatchesTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Parallel2d model = test::small_parallel_beam();
    ASSERT_TRUE(model.row(model.rows() - 1).empty()) << "the last ray must miss the image";
    for (int round = 1; round <= 3; ++round) {
        for (const int batch : {1, 3}) {
            SCOPED_TRACE("round " + std::to_string(round) + ", batch " + std::to_string(batch));
            const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng,
                                               -0.5f, 2.0f);
            SolverOptions o = options();
            o.max_iterations = 4;
            o.residual_replacement = 2;
            SolverOptions host = o;
            host.launch = SolveLaunch::host_loop;
            CgnrSolver reference{model, Regularizer{}, host, gpu(), batch};
            const auto [x_ref, res_ref] = solve_frames(reference, b);
            const RowsMode rows{mode()};
            CgnrSolver regularized{model, Regularizer::parse("tv:0.02", 0.01), o, gpu(), 1};
            solve_frames(regularized, std::vector<float>(b.begin(), b.begin() + model.rows()));
            CgnrSolver solver{model, Regularizer{}, o, gpu(), batch};
            const auto [x, res] = solve_frames(solver, b);
            for (int f = 0; f < batch; ++f) {
                EXPECT_EQ(res[f].iterations, 4) << "frame " << f;
                EXPECT_NEAR(res[f].rel_gradient, res_ref[f].rel_gradient,
                            1e-3 * res_ref[f].rel_gradient)
                    << "frame " << f;
            }
            EXPECT_LE(test::rel_error(x, x_ref), 1e-4);
        }
    }
}

std::string case_name(const ::testing::TestParamInfo<ModeForm>& info)
{
    return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Modes, PersistentRows,
                         ::testing::Combine(::testing::Values("auto", "staged", "system", "float"),
                                            ::testing::Values(CgnrForm::fused, CgnrForm::cgls1)),
                         case_name);

/// One frame solved by the host loop (x_ref) and by the persistent launch in
/// its default mode (x), `iterations` iterations with a residual
/// replacement every `replacement`.
struct NormalSolutions {
    std::vector<float> x, x_ref;
    FrameResult res, res_ref;
};
NormalSolutions normal_against_host_loop(const SystemModel& model, const std::vector<float>& b,
                                         int iterations, int replacement,
                                         const std::vector<float>& x0 = {})
{
    SolverOptions o;
    o.launch = SolveLaunch::persistent;
    o.max_iterations = iterations;
    o.residual_replacement = replacement;
    SolverOptions host = o;
    host.launch = SolveLaunch::host_loop;
    NormalSolutions s;
    s.x_ref = solve_cgnr(model, Regularizer{}, host, gpu(), b, x0, &s.res_ref);
    s.x = solve_cgnr(model, Regularizer{}, o, gpu(), b, x0, &s.res);
    return s;
}

/// Ran `iterations` iterations to a gradient as small as the host loop's,
/// give or take the float noise floor, and x is the host loop's up to float
/// sums in other orders.
void expect_as_host_loop(const NormalSolutions& s, int iterations)
{
    EXPECT_EQ(s.res.iterations, iterations);
    // After 12 to 15 iterations the problems of n = 1,000 sit at the float
    // noise floor (‖g‖/‖Aᵀb‖ ~1e-6), where the kernel's and the host loop's
    // values are two draws of noise: 3 of 1,200 runs of three of these tests
    // went past 3x + 1e-6 (up to 6.1e-6 against 1.5e-6), with the kernel as
    // it was before its grid barrier and after (as the batch tests,
    // expect_frames_as_host_loop). A wrong β or scatter stalls far above 1e-5.
    EXPECT_LE(s.res.rel_gradient, 3.0 * s.res_ref.rel_gradient + 1e-5);
    EXPECT_LE(test::rel_error(s.x, s.x_ref), 1e-3);
}

/// A problem of the persistent kernel as the solver passes it, without its buffers.
kernels::PersistentCgnrProblem problem_of(const SystemModel& model, int batch, bool cgls1,
                                          const Regularizer& regularizer = {})
{
    kernels::PersistentCgnrProblem p;
    p.system = model.view(gpu());
    p.terms = regularizer.terms();
    p.batch = batch;
    p.cgls1 = cgls1;
    return p;
}

TEST(PersistentNormalMatrix, TakesFusedFramesWithoutRegularizerAndFewColumns)
{
    RECON_REQUIRE_GPU();
    const Synthetic fits{20000, 3072, 100000, 3};
    const Synthetic wide{20000, 3073, 100000, 3};
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu().device()),
              cudaSuccess);
    const bool enough_sms = sms >= 128;  // 3,072 columns / 24 rows of AᵀA a block
    EXPECT_EQ(kernels::persistent_normal_matrix_applies(gpu(), problem_of(fits, 1, false)),
              enough_sms);
    EXPECT_FALSE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(wide, 1, false)));
    // batches: 2 to 4 frames a launch, larger ones in launches of 4
    for (const int batch : {2, 4, 9}) {
        EXPECT_EQ(kernels::persistent_normal_matrix_applies(gpu(), problem_of(fits, batch, false)),
                  enough_sms)
            << "batch " << batch;
    }
    EXPECT_FALSE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(fits, 1, true)));
    EXPECT_FALSE(kernels::persistent_normal_matrix_applies(
        gpu(), problem_of(fits, 1, false, Regularizer::parse("tikhonov:0.01"))));
    for (const char* mode : {"staged", "system", "float"}) {
        const RowsMode rows{mode};
        EXPECT_FALSE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(fits, 1, false)))
            << mode;
    }
    const Synthetic small{2000, 150, 9000, 3};
    EXPECT_TRUE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(small, 1, false)));
}

// The paper's two matrices: 3,000 columns (125 blocks of 24 rows of AᵀA)
// and 3,072 (every column slot of every thread), with residual
// replacements; against the host loop on the rows of A.
TEST(PersistentNormalMatrix, MatchesTheHostLoopAtThePapersSizes)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    for (const Synthetic& model : {Synthetic::paper_large(seed), Synthetic::paper_small(seed)}) {
        SCOPED_TRACE("n = " + std::to_string(model.cols()));
        if (!kernels::persistent_normal_matrix_applies(gpu(), problem_of(model, 1, false))) {
            GTEST_SKIP() << "this GPU has too few SMs to keep AᵀA of n = " << model.cols();
        }
        const auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
        expect_as_host_loop(normal_against_host_loop(model, b, 12, 5), 12);
    }
}

// A replacement in every iteration (h from G x − Aᵀb, β summed over it
// each time), and none (β always expanded).
TEST(PersistentNormalMatrix, ReplacementsInEveryIterationOrNone)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{40000, 1000, 220000, seed};
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
    for (const int replacement : {1, 0}) {
        SCOPED_TRACE("replacement every " + std::to_string(replacement));
        expect_as_host_loop(normal_against_host_loop(model, b, 15, replacement), 15);
    }
}

// Measurements at 2^-80 and 2^70 of the usual scale: the iteration's dot
// products are summed in float on values scaled by powers of two
// (scaled_dots.cuh); unscaled, the squares of the gradient would fall
// below float's range (~1e-46) at the first and overflow it (~1e46) at the
// second, and the frame would stop.
TEST(PersistentNormalMatrix, TinyAndHugeMeasurementsMatchTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{40000, 1000, 220000, seed};
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
    for (const int power : {-80, 70}) {
        SCOPED_TRACE("b times 2^" + std::to_string(power));
        auto scaled = b;
        for (float& v : scaled) v = std::ldexp(v, power);
        const NormalSolutions s = normal_against_host_loop(model, scaled, 15, 5);
        expect_as_host_loop(s, 15);
        EXPECT_EQ(s.res.status, SolveStatus::max_iterations);
    }
}

// A warm start: h0 = G x0 − Aᵀb. Fewer rows than columns, so that x0's
// part in the null space of A stays in x.
TEST(PersistentNormalMatrix, WarmStartKeepsTheInitialGuess)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{1000, 1500, 8000, seed};
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
    const auto x0 = test::random_vector(static_cast<std::size_t>(model.cols()), rng);
    const NormalSolutions warm = normal_against_host_loop(model, b, 12, 5, x0);
    EXPECT_EQ(warm.res.iterations, 12);
    EXPECT_LE(test::rel_error(warm.x, warm.x_ref), 1e-3);
    const NormalSolutions cold = normal_against_host_loop(model, b, 12, 5);
    EXPECT_GT(test::rel_error(warm.x, cold.x), 1e-2);
}

// A column in every row: G has a dense row and column, and each gradient's
// scatter adds all of a block's ~1,200 rows into one entry of its image
// (the other columns take a few entries each), with b's entries all of one
// sign, so that column 0's sums do not cancel.
TEST(PersistentNormalMatrix, AColumnInEveryRowMatchesTheHostLoop)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    CsrMatrix a;
    a.rows = 30000;
    a.cols = 600;
    a.row_ptr.push_back(0);
    std::uniform_int_distribution<kernels::index_t> column(1, a.cols - 1);
    std::uniform_real_distribution<float> weight(0.1f, 1.0f);
    for (kernels::index_t i = 0; i < a.rows; ++i) {
        std::vector<kernels::index_t> cols{0};
        while (cols.size() < 5) {
            const auto c = column(rng);
            if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
        }
        std::sort(cols.begin(), cols.end());
        for (const auto c : cols) {
            a.col_idx.push_back(c);
            a.values.push_back(c == 0 ? 1.0f : (rng() % 2 == 0 ? 1.0f : -1.0f) * weight(rng));
        }
        a.row_ptr.push_back(static_cast<kernels::size_type>(a.col_idx.size()));
    }
    const StoredMatrix model{std::move(a)};
    ASSERT_TRUE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(model, 1, false)));
    auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
    for (float& v : b) v += 3.0f;
    const NormalSolutions s = normal_against_host_loop(model, b, 12, 5);
    EXPECT_EQ(s.res.iterations, 12);
    // Column 0 makes ‖Aᵀb‖ large, and G (G_00 = 30,000) is rounded to
    // float: ‖g‖/‖Aᵀb‖ after the last two recurrence steps sits at ~1e-6
    // (up to 1.08e-6 over 300 seeds, against ~1e-8 on the rows of A), far
    // below the O(1) of a wrong scatter
    EXPECT_LE(s.res.rel_gradient, 3.0 * s.res_ref.rel_gradient + 1e-5);
    EXPECT_LE(test::rel_error(s.x, s.x_ref), 1e-3);
}

// A NaN in b makes Aᵀb and h0 non-finite: the frame stops before its first
// step, as the host loop's does, and x stays finite.
TEST(PersistentNormalMatrix, NonFiniteInputStopsTheFrame)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{20000, 1000, 110000, seed};
    auto b = test::random_vector(static_cast<std::size_t>(model.rows()), rng);
    b[model.rows() / 3] = std::numeric_limits<float>::quiet_NaN();
    const NormalSolutions s = normal_against_host_loop(model, b, 25, 50);
    EXPECT_EQ(s.res.status, SolveStatus::non_finite);
    EXPECT_EQ(s.res.status, s.res_ref.status);
    EXPECT_EQ(s.res.iterations, s.res_ref.iterations);
    for (std::size_t i = 0; i < s.x.size(); ++i) ASSERT_TRUE(std::isfinite(s.x[i])) << "pixel " << i;
}

/// `batch` frames solved together by the host loop (x_ref) and by the
/// persistent launch in its default mode (x).
struct BatchSolutions {
    std::vector<float> x, x_ref;
    std::vector<FrameResult> res, res_ref;
};
BatchSolutions batch_against_host_loop(const SystemModel& model, const std::vector<float>& b,
                                       int batch, int iterations, int replacement,
                                       const std::vector<float>& x0 = {})
{
    SolverOptions o;
    o.launch = SolveLaunch::persistent;
    o.max_iterations = iterations;
    o.residual_replacement = replacement;
    SolverOptions host = o;
    host.launch = SolveLaunch::host_loop;
    BatchSolutions s;
    CgnrSolver reference{model, Regularizer{}, host, gpu(), batch};
    std::tie(s.x_ref, s.res_ref) = solve_frames(reference, b, x0);
    CgnrSolver solver{model, Regularizer{}, o, gpu(), batch};
    std::tie(s.x, s.res) = solve_frames(solver, b, x0);
    return s;
}

/// Frame f of a [batch][size] vector.
std::vector<float> frame_of(const std::vector<float>& v, int batch, int f)
{
    const std::size_t size = v.size() / static_cast<std::size_t>(batch);
    return {v.begin() + static_cast<std::ptrdiff_t>(f * size),
            v.begin() + static_cast<std::ptrdiff_t>((f + 1) * size)};
}

/// Every frame as the host loop's (as expect_as_host_loop), frame by frame.
void expect_frames_as_host_loop(const BatchSolutions& s, int batch, int iterations)
{
    for (int f = 0; f < batch; ++f) {
        SCOPED_TRACE("frame " + std::to_string(f));
        EXPECT_EQ(s.res[f].iterations, iterations);
        EXPECT_EQ(s.res[f].status, s.res_ref[f].status);
        // After 12 to 15 iterations these problems are at the float noise
        // floor (‖g‖/‖Aᵀb‖ ~1e-6 for n = 1,000), where the batch kernel's
        // and the host loop's values are two draws of noise: up to 4.4e-6
        // against 0.8e-6 (4 of 240 runs of three of these tests went past
        // 3x + 1e-6, with the kernel as it was before its sums met in
        // atomics, and after). A wrong β stalls far above 1e-5.
        EXPECT_LE(s.res[f].rel_gradient, 3.0 * s.res_ref[f].rel_gradient + 1e-5);
        EXPECT_LE(test::rel_error(frame_of(s.x, batch, f), frame_of(s.x_ref, batch, f)), 1e-3);
    }
}

// Batches of 2 to 4 frames share each pass over AᵀA (the batch kernel):
// the paper's larger problem, 125 blocks, each frame against the host loop.
TEST(PersistentNormalMatrix, BatchesMatchTheHostLoopAtThePapersSize)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model = Synthetic::paper_large(seed);
    for (const int batch : {2, 4}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        if (!kernels::persistent_normal_matrix_applies(gpu(), problem_of(model, batch, false))) {
            GTEST_SKIP() << "this GPU has too few SMs to keep AᵀA of n = " << model.cols();
        }
        const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
        expect_frames_as_host_loop(batch_against_host_loop(model, b, batch, 12, 5), batch, 12);
    }
}

// A batch of 3 (one slot of the four empty) with a replacement in every
// iteration (β summed over the new gradient in a third exchange each time)
// and with none (β always expanded).
TEST(PersistentNormalMatrix, BatchReplacementsInEveryIterationOrNone)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{40000, 1000, 220000, seed};
    const int batch = 3;
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    for (const int replacement : {1, 0}) {
        SCOPED_TRACE("replacement every " + std::to_string(replacement));
        expect_frames_as_host_loop(batch_against_host_loop(model, b, batch, 15, replacement), batch,
                                   15);
    }
}

// Frames at 2^-60, 1 and 2^60 of the usual scale in one batch: each
// frame's sums and scalars are its own.
TEST(PersistentNormalMatrix, FramesOfEveryScaleInOneBatch)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{40000, 1000, 220000, seed};
    const std::size_t m = model.rows();
    const int batch = 3;
    auto b = test::random_vector(m * batch, rng);
    for (std::size_t i = 0; i < m; ++i) {
        b[i] = std::ldexp(b[i], -60);
        b[2 * m + i] = std::ldexp(b[2 * m + i], 60);
    }
    expect_frames_as_host_loop(batch_against_host_loop(model, b, batch, 15, 5), batch, 15);
}

// A frame of zeros (Aᵀb = 0: it stops before its first step) and a frame
// with a NaN beside two good ones: the good frames run on as the host
// loop's, and no x becomes non-finite.
TEST(PersistentNormalMatrix, StoppedFramesLeaveTheOthersInTheBatch)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{20000, 1000, 110000, seed};
    const std::size_t m = model.rows();
    const int batch = 4;
    auto b = test::random_vector(m * batch, rng);
    std::fill(b.begin() + static_cast<std::ptrdiff_t>(m), b.begin() + static_cast<std::ptrdiff_t>(2 * m),
              0.0f);
    b[3 * m + m / 3] = std::numeric_limits<float>::quiet_NaN();
    const BatchSolutions s = batch_against_host_loop(model, b, batch, 25, 10);
    EXPECT_EQ(s.res[3].status, SolveStatus::non_finite);
    for (int f = 0; f < batch; ++f) {
        SCOPED_TRACE("frame " + std::to_string(f));
        EXPECT_EQ(s.res[f].status, s.res_ref[f].status);
        EXPECT_EQ(s.res[f].iterations, s.res_ref[f].iterations);
    }
    for (const int f : {0, 2}) {
        EXPECT_LE(test::rel_error(frame_of(s.x, batch, f), frame_of(s.x_ref, batch, f)), 1e-3)
            << "frame " << f;
    }
    for (std::size_t i = 0; i < s.x.size(); ++i) ASSERT_TRUE(std::isfinite(s.x[i])) << "pixel " << i;
}

// A warm-started batch of 2: h0 = Aᵀ(A x0 − b) from the rows, for both
// frames in one pass. Fewer rows than columns, so that x0's part in the
// null space of A stays in x.
TEST(PersistentNormalMatrix, WarmStartedBatchKeepsTheInitialGuesses)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const Synthetic model{1000, 1500, 8000, seed};
    const int batch = 2;
    const auto b = test::random_vector(static_cast<std::size_t>(model.rows()) * batch, rng);
    auto x0 = test::random_vector(static_cast<std::size_t>(model.cols()) * batch, rng);
    std::fill(x0.begin(), x0.begin() + model.cols(), 0.0f);  // frame 0 cold, frame 1 warm
    const BatchSolutions warm = batch_against_host_loop(model, b, batch, 12, 5, x0);
    expect_frames_as_host_loop(warm, batch, 12);
    const BatchSolutions cold = batch_against_host_loop(model, b, batch, 12, 5);
    EXPECT_LE(test::rel_error(frame_of(warm.x, batch, 0), frame_of(cold.x, batch, 0)), 1e-3);
    EXPECT_GT(test::rel_error(frame_of(warm.x, batch, 1), frame_of(cold.x, batch, 1)), 1e-2);
}

/// The ill-conditioned problem (cond(A) = 100, 4,000 x 150) as frames with
/// different noise, each with its double-precision least-squares solution.
struct IllConditionedFrames {
    static constexpr int rows = 4000, cols = 150;

    IllConditionedFrames(int batch, std::mt19937_64& rng)
        : IllConditionedFrames{test::ill_conditioned(rows, cols, 1e2, rng), batch, rng}
    {
    }

    StoredMatrix model;
    std::vector<float> b;
    std::vector<std::vector<float>> references;

private:
    IllConditionedFrames(std::pair<CsrMatrix, test::Dense> problem, int batch, std::mt19937_64& rng)
        : model{std::move(problem.first)}
    {
        const test::Dense& a = problem.second;
        for (int f = 0; f < batch; ++f) {
            const auto x_true = test::random_vector(cols, rng);
            const auto noise = test::random_vector(rows, rng, -0.01f, 0.01f);
            const auto bf = test::to_float(a * test::to_vec(x_true) + test::to_vec(noise));
            b.insert(b.end(), bf.begin(), bf.end());
            references.push_back(test::to_float(a.colPivHouseholderQr().solve(test::to_vec(bf))));
        }
    }
};

/// Each frame's relative error against its reference after a solve to
/// 1e-7 (3,000 iterations at most, a replacement every 20); expects every
/// frame converged.
std::vector<double> converged_errors(const IllConditionedFrames& p, int batch)
{
    SolverOptions o;
    o.launch = SolveLaunch::persistent;
    o.max_iterations = 3000;
    o.tolerance = 1e-7;
    o.residual_replacement = 20;
    CgnrSolver solver{p.model, Regularizer{}, o, gpu(), batch};
    const auto [x, res] = solve_frames(solver, p.b);
    std::vector<double> errors;
    for (int f = 0; f < batch; ++f) {
        EXPECT_EQ(res[f].status, SolveStatus::converged) << "frame " << f;
        errors.push_back(test::rel_error(frame_of(x, batch, f), p.references[f]));
        SCOPED_TRACE("frame " + std::to_string(f) + " after " + std::to_string(res[f].iterations) +
                     " iterations");
        EXPECT_LE(errors.back(), 1e-4);
    }
    return errors;
}

// The ill-conditioned problem (cond(A) = 100) in a batch of 4 frames with
// different noise: each within 1e-4 of its double-precision least-squares
// solution.
TEST(PersistentNormalMatrix, BatchConvergesToTheDoublePrecisionSolutions)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int batch = 4;
    const IllConditionedFrames p{batch, rng};
    ASSERT_TRUE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(p.model, batch, false)));
    converged_errors(p, batch);
}

// Replacements once x has settled take h = h_last + G Δx instead of the
// rows of A: on the ill-conditioned problem, as accurate as the batch
// with every replacement from the rows (RECON_PERSISTENT_REPLACEMENT=rows).
// Formed whole as G x − Aᵀb, h carried float's error of Aᵀb, and such a
// solve stalled at ~1e-4 (docs/gpu-performance.md, v13).
TEST(PersistentNormalMatrix, BatchReplacementsFromGAreAsAccurateAsFromTheRows)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int batch = 4;
    const IllConditionedFrames p{batch, rng};
    ASSERT_TRUE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(p.model, batch, false)));
    const std::vector<double> from_g = converged_errors(p, batch);
    std::vector<double> from_rows;
    {
        const test::ScopedEnv rows{"RECON_PERSISTENT_REPLACEMENT", "rows"};
        from_rows = converged_errors(p, batch);
    }
    for (int f = 0; f < batch; ++f) {
        std::printf("frame %d: relative error %.3g with replacements from G, %.3g from the rows\n", f,
                    from_g[f], from_rows[f]);
        EXPECT_LE(from_g[f], 2.0 * from_rows[f] + 1e-6) << "frame " << f;
    }
}

// A warm start near the solution: Δx of the first replacement is small, so
// it takes G (h = h0 + G Δx, h0 from the rows at x0), and so do the ones
// after; every frame as the host loop's.
TEST(PersistentNormalMatrix, BatchWarmStartedNearTheSolutionReplacesFromG)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const int batch = 4;
    const IllConditionedFrames p{batch, rng};
    ASSERT_TRUE(kernels::persistent_normal_matrix_applies(gpu(), problem_of(p.model, batch, false)));
    std::vector<float> x0;
    for (int f = 0; f < batch; ++f) {
        // each pixel of the solution off by up to 1e-4 of itself
        const auto jitter = test::random_vector(p.references[f].size(), rng);
        for (std::size_t i = 0; i < jitter.size(); ++i) {
            x0.push_back(p.references[f][i] * (1.0f + 1e-4f * jitter[i]));
        }
    }
    expect_frames_as_host_loop(batch_against_host_loop(p.model, p.b, batch, 30, 3, x0), batch, 30);
}

TEST(PersistentRowsMode, AnUnknownModeIsRejectedByName)
{
    RECON_REQUIRE_GPU();
    const Synthetic model{2000, 300, 10000, 5};
    SolverOptions o;
    o.launch = SolveLaunch::persistent;
    o.max_iterations = 3;
    const RowsMode rows{"sideways"};
    try {
        solve_cgnr(model, Regularizer{}, o, gpu(), std::vector<float>(2000, 1.0f));
        FAIL() << "expected an error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string{e.what()}.find("RECON_PERSISTENT_ROWS"), std::string::npos) << e.what();
        EXPECT_NE(std::string{e.what()}.find("sideways"), std::string::npos) << e.what();
    }
}

TEST(PersistentRowsMode, AnUnknownReplacementModeIsRejectedByName)
{
    RECON_REQUIRE_GPU();
    const Synthetic model{4000, 300, 20000, 5};
    if (!kernels::persistent_normal_matrix_applies(gpu(), problem_of(model, 2, false))) {
        GTEST_SKIP() << "this GPU cannot keep AᵀA of n = " << model.cols();
    }
    SolverOptions o;
    o.launch = SolveLaunch::persistent;
    o.max_iterations = 3;
    const test::ScopedEnv mode{"RECON_PERSISTENT_REPLACEMENT", "sometimes"};
    try {
        CgnrSolver solver{model, Regularizer{}, o, gpu(), 2};
        solve_frames(solver, std::vector<float>(2 * 4000, 1.0f));
        FAIL() << "expected an error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string{e.what()}.find("RECON_PERSISTENT_REPLACEMENT"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string{e.what()}.find("sometimes"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace recon
