// The pieces of the GPU path as the CPU (and a build without CUDA) sees
// them: pinned host buffers and events with their host fallbacks, the stage
// timers, FrameSolver's submit/finish protocol, and the worker's in-flight
// loop with bad frames among good ones. The GPU side of the same scenarios
// is in tests/cuda/cuda_overlap_test.cpp.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kernels/events.hpp"
#include "kernels/host_memory.hpp"
#include "kernels/memory.hpp"
#include "kernels/primitives.hpp"
#include "pipeline/overlap_scenarios.hpp"
#include "pipeline/stage_timer.hpp"

namespace recon::pipeline {
namespace {

using kernels::Event;
using kernels::Executor;
using kernels::PinnedArray;
using namespace std::chrono_literals;

TEST(PinnedArray, HoldsWhatIsWrittenAndCopiesLikeHostMemory)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto values = recon::test::random_vector(1000, rng);

    PinnedArray<float> pinned{1000};
    ASSERT_EQ(pinned.size(), 1000);
    ASSERT_NE(pinned.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pinned.data()) % 64, 0U);
    std::copy(values.begin(), values.end(), pinned.data());
    // Without a device it is ordinary heap memory.
    if (kernels::cuda_device_count() == 0) {
        EXPECT_FALSE(pinned.page_locked());
    }

    const Executor cpu = Executor::cpu();
    kernels::Array<float> copy{cpu, 1000};
    kernels::copy(cpu, copy.view(), cpu, std::as_const(pinned).view());
    EXPECT_EQ(copy.to_host(), values);

    PinnedArray<float> moved{std::move(pinned)};
    EXPECT_EQ(pinned.size(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(pinned.data(), nullptr);
    ASSERT_EQ(moved.size(), 1000);
    EXPECT_EQ(moved[999], values[999]);
    moved = PinnedArray<float>{3};
    EXPECT_EQ(moved.size(), 3);
    EXPECT_EQ(PinnedArray<float>{0}.data(), nullptr);
}

TEST(Event, OnTheCpuIsTheHostTimeOfRecord)
{
    const Executor cpu = Executor::cpu();
    Event start{cpu}, stop{cpu};
    EXPECT_FALSE(start.recorded());
    EXPECT_TRUE(start.ready());  // never recorded: nothing to wait for
    start.record(cpu);
    std::this_thread::sleep_for(20ms);
    stop.record(cpu);
    stop.synchronize();
    EXPECT_TRUE(stop.ready());
    const double ms = kernels::elapsed_ms(start, stop);
    EXPECT_GE(ms, 19.9);
    EXPECT_LT(ms, 2000.0);
    kernels::stream_wait(cpu, stop);  // a no-op once recorded

    Event moved{std::move(stop)};
    EXPECT_TRUE(moved.recorded());
    EXPECT_DOUBLE_EQ(kernels::elapsed_ms(start, moved), ms);
}

TEST(Event, UnrecordedEventsAreRefusedClearly)
{
    const Executor cpu = Executor::cpu();
    Event recorded{cpu}, never{cpu};
    recorded.record(cpu);
    EXPECT_THROW(kernels::elapsed_ms(recorded, never), std::logic_error);
    EXPECT_THROW(kernels::elapsed_ms(never, recorded), std::logic_error);
    try {
        kernels::stream_wait(cpu, never);
        FAIL() << "stream_wait on an unrecorded event must throw";
    } catch (const std::logic_error& e) {
        EXPECT_NE(std::string{e.what()}.find("never recorded"), std::string::npos) << e.what();
    }
}

TEST(Stream, OnTheCpuOwnsNothingAndRunsOnTheCpu)
{
    kernels::Stream stream{Executor::cpu()};
    EXPECT_TRUE(stream.executor().is_cpu());
    EXPECT_EQ(stream.executor().stream(), nullptr);
    stream.synchronize();
    kernels::Stream moved{std::move(stream)};
    EXPECT_TRUE(moved.executor().is_cpu());
}

TEST(Stream, WithoutTheCudaBackendACudaStreamOrEventIsAClearError)
{
    if (kernels::cuda_compiled()) GTEST_SKIP() << "this build has the CUDA backend";
    const Executor gpu = Executor::cuda(0);
    for (const auto& make : {+[](const Executor& e) { kernels::Stream s{e}; },
                             +[](const Executor& e) { Event ev{e}; }}) {
        try {
            make(gpu);
            FAIL() << "expected the no-CUDA error";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string{e.what()}.find("no CUDA backend"), std::string::npos)
                << e.what();
        }
    }
    Event cpu_event{Executor::cpu()};
    EXPECT_THROW(cpu_event.record(gpu), std::runtime_error);
}

TEST(StageTimer, TheCpuGetsTheHostTimerAndEventTimersTimeOnTheCpuToo)
{
    const Executor cpu = Executor::cpu();
    const auto timer = make_stage_timer(cpu);
    EXPECT_NE(dynamic_cast<HostStageTimer*>(timer.get()), nullptr);

    EventStageTimer events{cpu};
    events.start(Stage::solve);
    std::this_thread::sleep_for(15ms);
    events.stop(Stage::solve, cpu);
    EXPECT_GE(events.elapsed_ms(Stage::solve), 14.9);
    EXPECT_LT(events.elapsed_ms(Stage::solve), 2000.0);
    try {
        events.elapsed_ms(Stage::upload);
        FAIL() << "an unmeasured stage must throw";
    } catch (const std::logic_error& e) {
        EXPECT_NE(std::string{e.what()}.find("'upload'"), std::string::npos) << e.what();
    }
}

TEST(CgnrSolver, ResultsCopiedToPinnedMemoryReadAsResultsDoes)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto model = recon::make_system_model(test::synthetic_spec(700, 120, rng()));
    const auto settings = test::overlap_settings(true);
    const Executor cpu = Executor::cpu();
    recon::CgnrSolver solver{*model, settings.regularizer, settings.solver, cpu};
    const auto b = recon::test::random_vector(700, rng);
    kernels::copy(cpu, solver.input(), cpu,
                  kernels::View<const float>{b.data(), static_cast<kernels::size_type>(b.size())});
    kernels::fill(cpu, solver.image(), 0.0f);
    solver.solve();

    PinnedArray<kernels::CgnrScalars> host{1};
    solver.queue_results_copy(host.view());
    const recon::FrameResult copied = recon::CgnrSolver::frame_result(host[0]);
    const recon::FrameResult direct = solver.results().front();
    EXPECT_EQ(copied.iterations, settings.solver.max_iterations);
    EXPECT_EQ(copied.iterations, direct.iterations);
    EXPECT_EQ(copied.status, direct.status);
    EXPECT_GT(copied.rel_gradient, 0.0);
    EXPECT_DOUBLE_EQ(copied.rel_gradient, direct.rel_gradient);

    PinnedArray<kernels::CgnrScalars> wrong{2};
    try {
        solver.queue_results_copy(wrong.view());
        FAIL() << "a buffer of the wrong size must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string{e.what()}.find("expected room for 1 frames, found 2"),
                  std::string::npos)
            << e.what();
    }
}

QueuedFrame queued(sensors::Frame frame)
{
    QueuedFrame item;
    item.frame = std::move(frame);
    item.arrival = Clock::now();
    item.t_arrival_ns = wall_clock_ns();
    return item;
}

TEST(FrameSolver, OnTheCpuSubmitSolvesOneFrameAtATime)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto spec = test::synthetic_spec(700, 120, rng());
    SystemModels models{{{"a", spec}}};
    FrameSolver solver{models, test::overlap_settings(true), Executor::cpu()};
    EXPECT_EQ(solver.capacity(), 1);
    EXPECT_THROW(solver.finish(), std::logic_error);

    const auto b = recon::test::random_vector(700, rng);
    solver.submit(queued(test::make_frame("a", 0, b)), Clock::now());
    EXPECT_EQ(solver.in_flight(), 1);
    EXPECT_THROW(solver.submit(queued(test::make_frame("a", 1, b)), Clock::now()),
                 std::logic_error);
    EXPECT_THROW(solver.solve(queued(test::make_frame("a", 1, b)), Clock::now()),
                 std::logic_error);
    const Reconstruction r = solver.finish();
    EXPECT_EQ(solver.in_flight(), 0);
    EXPECT_EQ(r.frame_id, 0);
    const auto model = recon::make_system_model(spec);
    const auto settings = test::overlap_settings(true);
    const auto x = recon::solve_cgnr(*model, settings.regularizer, settings.solver,
                                     Executor::cpu(), b);
    EXPECT_LT(test::relative_max_diff(r.image, x), 1e-5);
    EXPECT_GT(r.times[Stage::solve], 0.0);
}

TEST(FrameSolver, OnTheCpuTwoFramesInFlightRunTheSlotsInOrder)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const std::map<std::string, recon::SystemSpec> specs{
        {"a", test::synthetic_spec(700, 120, rng())}};
    const auto settings = test::overlap_settings(true);
    std::vector<sensors::Frame> frames;
    for (int k = 0; k < 3; ++k) {
        frames.push_back(test::make_frame("a", k, recon::test::random_vector(700, rng)));
    }
    SystemModels models{specs};
    FrameSolver solver{models, settings, Executor::cpu(), 2};
    ASSERT_EQ(solver.capacity(), 2);
    EXPECT_TRUE(solver.oldest_ready());
    solver.submit(queued(frames[0]), Clock::now());
    solver.submit(queued(frames[1]), Clock::now());
    EXPECT_EQ(solver.in_flight(), 2);
    EXPECT_THROW(solver.submit(queued(frames[2]), Clock::now()), std::logic_error);
    std::vector<Reconstruction> got;
    got.push_back(solver.finish());
    solver.submit(queued(frames[2]), Clock::now());
    got.push_back(solver.finish());
    got.push_back(solver.finish());
    EXPECT_THROW(solver.finish(), std::logic_error);

    const auto expected = test::sequential_reference(specs, settings, frames);
    for (std::size_t k = 0; k < 3; ++k) {
        SCOPED_TRACE("frame " + std::to_string(k));
        EXPECT_EQ(got[k].frame_id, static_cast<std::int64_t>(k));
        EXPECT_LE(recon::test::rel_error(got[k].image, expected[k].image), 1e-5);
        EXPECT_GE(got[k].times[Stage::upload], 0.0);
        EXPECT_GT(got[k].times[Stage::solve], 0.0);
    }
    EXPECT_THROW((FrameSolver{models, settings, Executor::cpu(), 3}), std::invalid_argument);
}

/// The worker on the CPU, one frame at a time (as the pipeline runs it) and
/// with the GPU path's two slots (run in order, but with its bookkeeping:
/// optimistic warm start, the re-solve after a failed frame).
class CpuWorker : public ::testing::TestWithParam<int> {};

TEST_P(CpuWorker, SeveralSensorsGiveTheSequentialImages)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto scenario = test::multi_sensor_scenario(rng);
    const auto settings = test::overlap_settings(true);
    const auto run = test::run_worker(Executor::cpu(), scenario.specs, settings,
                                      scenario.frames, GetParam());
    EXPECT_EQ(run.capacity, GetParam());
    EXPECT_TRUE(run.errors.empty());
    test::expect_matches_reference(
        run, test::sequential_reference(scenario.specs, settings, scenario.frames), 1e-5);
}

TEST_P(CpuWorker, ABadFrameAmongGoodOnesCostsOnlyItself)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto scenario = test::bad_frames_scenario(rng);
    const auto settings = test::overlap_settings(true);
    const auto run = test::run_worker(Executor::cpu(), scenario.specs, settings,
                                      scenario.frames, GetParam());
    test::expect_bad_frame_errors(run.errors);
    const auto expected = test::sequential_reference(scenario.specs, settings, scenario.frames);
    ASSERT_EQ(expected.size(), 8U);
    EXPECT_EQ(expected[3].status, recon::SolveStatus::non_finite);  // frame 4, the NaN
    // Frame 5 follows the NaN frame of its sensor and must start from zeros.
    test::expect_matches_reference(run, expected, 1e-5);
}

TEST_P(CpuWorker, WithoutWarmStartEveryFrameStartsFromZeros)
{
    const auto seed = recon::test::fresh_seed();
    SCOPED_TRACE(recon::test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    const auto scenario = test::multi_sensor_scenario(rng);
    const auto settings = test::overlap_settings(false);
    const auto run = test::run_worker(Executor::cpu(), scenario.specs, settings,
                                      scenario.frames, GetParam());
    test::expect_matches_reference(
        run, test::sequential_reference(scenario.specs, settings, scenario.frames), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(FramesInFlight, CpuWorker, ::testing::Values(1, 2),
                         [](const auto& info) {
                             return std::to_string(info.param) + "_in_flight";
                         });

}  // namespace
}  // namespace recon::pipeline
