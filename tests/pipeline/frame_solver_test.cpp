// The frame pipeline against the solver called directly: same images, warm
// start from the previous image of the same sensor, stage times filled in,
// and a frame of the wrong length costing that frame only.

#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/frame_pipeline.hpp"
#include "recon/cgnr.hpp"

namespace recon::pipeline {
namespace {

/// Keeps what reaches it.
class CollectingSink final : public FrameSink {
public:
    void write_image(const Reconstruction& r) override { images.push_back(r.frame_id); }
    void write_record(const Reconstruction& r) override { records.push_back(r); }
    std::vector<std::int64_t> images;
    std::vector<Reconstruction> records;
};

recon::SystemSpec small_synthetic(std::uint64_t seed)
{
    recon::SystemSpec spec;
    spec.geometry = "synthetic";
    spec.rows = 700;
    spec.cols = 120;
    spec.nnz = 4900;
    spec.seed = seed;
    return spec;
}

std::vector<float> random_data(std::size_t size, std::mt19937& rng)
{
    std::uniform_real_distribution<float> u{-1.0f, 1.0f};
    std::vector<float> v(size);
    for (auto& e : v) e = u(rng);
    return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b)
{
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
    return d;
}

PipelineSetup setup_for(const recon::SystemSpec& spec, bool warm_start)
{
    PipelineSetup setup;
    setup.sensors = {{"s0", spec}};
    setup.solve.solver.max_iterations = 12;
    setup.solve.solver.tolerance = 0.0;
    setup.solve.regularizer = recon::Regularizer::parse("tikhonov:0.1");
    setup.solve.warm_start = warm_start;
    setup.solve.budget_ms = 1e6;
    return setup;
}

sensors::Frame frame(std::int64_t id, std::vector<float> data)
{
    sensors::Frame f;
    f.sensor = "s0";
    f.frame_id = id;
    f.timestamp_ns = id * 1000;
    f.data = std::move(data);
    return f;
}

TEST(FramePipeline, ImagesMatchTheSolverAndWarmStartChains)
{
    std::mt19937 rng{std::random_device{}()};
    const auto spec = small_synthetic(rng());
    const auto model = recon::make_system_model(spec);
    const auto b0 = random_data(700, rng), b1 = random_data(700, rng);

    SinkSet sinks;
    auto sink = std::make_shared<CollectingSink>();
    sinks.add(sink);
    const PipelineSetup setup = setup_for(spec, /*warm_start=*/true);
    {
        FramePipeline pipeline{setup, sinks};
        pipeline.submit(frame(0, b0));
        pipeline.submit(frame(1, b1));
        pipeline.finish();
        EXPECT_EQ(pipeline.errors().count(), 0);
    }
    ASSERT_EQ(sink->records.size(), 2U);
    EXPECT_EQ(sink->images, (std::vector<std::int64_t>{0, 1}));

    const auto exec = kernels::Executor::cpu();
    const auto x0 = recon::solve_cgnr(*model, setup.solve.regularizer, setup.solve.solver, exec, b0);
    const auto x1 = recon::solve_cgnr(*model, setup.solve.regularizer, setup.solve.solver, exec, b1, x0);
    const auto& r0 = sink->records[0];
    const auto& r1 = sink->records[1];
    EXPECT_LT(max_abs_diff(r0.image, x0), 1e-5);
    EXPECT_LT(max_abs_diff(r1.image, x1), 1e-5);  // started from frame 0's image
    EXPECT_EQ(r0.result.iterations, 12);
    EXPECT_EQ(r1.shape.size(), 120);
    for (const auto& r : sink->records) {
        EXPECT_GT(r.times[Stage::solve], 0.0);
        EXPECT_GE(r.times.total_ms, r.times[Stage::solve]);
        EXPECT_FALSE(r.deadline_missed);
        EXPECT_GT(r.t_arrival_ns, 0);
    }
}

TEST(FramePipeline, WithoutWarmStartEachFrameStartsFromZero)
{
    std::mt19937 rng{std::random_device{}()};
    const auto spec = small_synthetic(rng());
    const auto model = recon::make_system_model(spec);
    const auto b0 = random_data(700, rng), b1 = random_data(700, rng);
    SinkSet sinks;
    auto sink = std::make_shared<CollectingSink>();
    sinks.add(sink);
    const PipelineSetup setup = setup_for(spec, /*warm_start=*/false);
    {
        FramePipeline pipeline{setup, sinks};
        pipeline.submit(frame(0, b0));
        pipeline.submit(frame(1, b1));
    }
    ASSERT_EQ(sink->records.size(), 2U);
    const auto x1 = recon::solve_cgnr(*model, setup.solve.regularizer, setup.solve.solver,
                                      kernels::Executor::cpu(), b1);
    EXPECT_LT(max_abs_diff(sink->records[1].image, x1), 1e-5);
}

TEST(FramePipeline, WrongFrameLengthCostsThatFrameOnly)
{
    std::mt19937 rng{std::random_device{}()};
    const auto spec = small_synthetic(rng());
    SinkSet sinks;
    auto sink = std::make_shared<CollectingSink>();
    sinks.add(sink);
    FramePipeline pipeline{setup_for(spec, true), sinks};
    pipeline.submit(frame(0, random_data(699, rng)));
    pipeline.submit(frame(1, random_data(700, rng)));
    pipeline.finish();
    ASSERT_EQ(pipeline.errors().count(), 1);
    const auto message = pipeline.errors().first().front();
    EXPECT_NE(message.find("expected 700"), std::string::npos) << message;
    EXPECT_NE(message.find("found 699"), std::string::npos) << message;
    ASSERT_EQ(sink->records.size(), 1U);
    EXPECT_EQ(sink->records[0].frame_id, 1);
}

TEST(FramePipeline, BadGeometryFailsAtSetupNamingTheSensor)
{
    recon::SystemSpec spec;
    spec.geometry = "fanbeam";
    SinkSet sinks;
    try {
        FramePipeline pipeline{setup_for(spec, true), sinks};
        FAIL() << "unknown geometry accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string{e.what()}.find("s0"), std::string::npos) << e.what();
        EXPECT_NE(std::string{e.what()}.find("fanbeam"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace recon::pipeline
