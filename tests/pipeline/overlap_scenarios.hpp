#pragma once
// Scenarios for the worker with frames in flight, shared by the CPU suite
// (tests/pipeline) and the GPU suite (tests/cuda): frames of several sensors,
// back to back, all queued before the worker starts (so that on a GPU it
// keeps two in flight), against a sequential reference computed on the CPU
// with recon::solve_cgnr, warm start chained through the good frames.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipeline/frame_solver.hpp"
#include "pipeline/worker.hpp"
#include "recon/cgnr.hpp"
#include "test_utils.hpp"

namespace recon::pipeline::test {

/// Keeps every record that reaches it, in delivery order.
class CollectingSink final : public FrameSink {
public:
    void write_image(const Reconstruction& r) override { image_ids.push_back(r.frame_id); }
    void write_record(const Reconstruction& r) override { records.push_back(r); }
    std::vector<std::int64_t> image_ids;
    std::vector<Reconstruction> records;
};

inline recon::SystemSpec synthetic_spec(int rows, int cols, std::uint64_t seed)
{
    recon::SystemSpec spec;
    spec.geometry = "synthetic";
    spec.rows = rows;
    spec.cols = cols;
    spec.nnz = static_cast<std::int64_t>(rows) * 7;
    spec.seed = seed;
    return spec;
}

inline sensors::Frame make_frame(const std::string& sensor, std::int64_t id,
                                 std::vector<float> data)
{
    sensors::Frame f;
    f.sensor = sensor;
    f.frame_id = id;
    f.timestamp_ns = id * 1000;
    f.data = std::move(data);
    return f;
}

/// Tikhonov-regularized, a fixed iteration count (no tolerance), warm start.
inline SolveSettings overlap_settings(bool warm_start)
{
    SolveSettings s;
    s.solver.max_iterations = 12;
    s.solver.tolerance = 0.0;
    s.regularizer = recon::Regularizer::parse("tikhonov:0.1");
    s.warm_start = warm_start;
    s.budget_ms = 1e6;
    return s;
}

struct WorkerRun {
    std::vector<Reconstruction> records;  // delivery order
    std::vector<std::int64_t> image_ids;
    std::vector<std::string> errors;
    int capacity = 0;
};

/// Queues every frame, closes the queue, then runs one Worker on this
/// thread, its FrameSolver made with `frames_in_flight` (0: automatic).
inline WorkerRun run_worker(const kernels::Executor& exec,
                            const std::map<std::string, recon::SystemSpec>& specs,
                            const SolveSettings& settings,
                            const std::vector<sensors::Frame>& frames, int frames_in_flight = 0)
{
    SystemModels models{specs};
    FrameSolver solver{models, settings, exec, frames_in_flight};
    for (const auto& [name, spec] : specs) solver.prepare(name);
    SinkSet sinks;
    auto sink = std::make_shared<CollectingSink>();
    sinks.add(sink);
    FrameErrors errors;
    FrameQueue queue{frames.size() + 1, DropPolicy::block};
    for (const auto& f : frames) {
        QueuedFrame item;
        item.frame = f;
        item.arrival = Clock::now();
        item.t_arrival_ns = wall_clock_ns();
        queue.push(std::move(item));
    }
    queue.close();
    Worker worker{queue, solver, sinks, errors};
    worker.run();
    return {sink->records, sink->image_ids, errors.first(100), solver.capacity()};
}

struct Expected {
    std::int64_t frame_id = 0;
    std::vector<float> image;
    recon::SolveStatus status = recon::SolveStatus::running;
};

/// What a sequential pipeline delivers: frames of an unknown sensor or a
/// wrong length are skipped; each frame starts from its sensor's previous image when that
/// frame's solve was good (converged or max_iterations), else from zeros.
inline std::vector<Expected> sequential_reference(
    const std::map<std::string, recon::SystemSpec>& specs, const SolveSettings& settings,
    const std::vector<sensors::Frame>& frames)
{
    std::map<std::string, std::unique_ptr<recon::SystemModel>> models;
    std::map<std::string, std::vector<float>> previous;  // good images only
    std::vector<Expected> out;
    for (const auto& f : frames) {
        if (specs.count(f.sensor) == 0U) continue;  // unknown sensor: rejected
        auto& model = models[f.sensor];
        if (!model) model = recon::make_system_model(specs.at(f.sensor));
        if (f.data.size() != static_cast<std::size_t>(model->rows())) continue;
        const auto it = previous.find(f.sensor);
        const std::vector<float> x0 =
            settings.warm_start && it != previous.end() ? it->second : std::vector<float>{};
        recon::FrameResult result;
        Expected e;
        e.frame_id = f.frame_id;
        e.image = recon::solve_cgnr(*model, settings.regularizer, settings.solver,
                                    kernels::Executor::cpu(), f.data, x0, &result);
        e.status = result.status;
        if (e.status == recon::SolveStatus::converged ||
            e.status == recon::SolveStatus::max_iterations) {
            previous[f.sensor] = e.image;
        } else {
            previous.erase(f.sensor);
        }
        out.push_back(std::move(e));
    }
    return out;
}

/// Largest |a - b| relative to the largest |b|.
inline double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b)
{
    double diff = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
        scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    }
    return diff / scale;
}

/// Three sensors of different sizes; frames of one sensor back to back and
/// interleaved with the others.
struct MultiSensorScenario {
    std::map<std::string, recon::SystemSpec> specs;
    std::vector<sensors::Frame> frames;
};

inline MultiSensorScenario multi_sensor_scenario(std::mt19937_64& rng)
{
    MultiSensorScenario s;
    s.specs = {{"a", synthetic_spec(700, 120, rng())},
               {"b", synthetic_spec(1500, 300, rng())},
               {"c", synthetic_spec(400, 64, rng())}};
    const std::vector<std::string> order{"a", "a", "a", "b", "a", "c", "c", "b", "b",
                                         "a", "c", "b", "b", "a"};
    std::int64_t id = 0;
    for (const auto& name : order) {
        const auto m = static_cast<std::size_t>(s.specs.at(name).rows);
        s.frames.push_back(make_frame(name, id++, recon::test::random_vector(m, rng)));
    }
    return s;
}

/// Checks delivered records against the sequential reference: same frames,
/// same order, same statuses, images within `tolerance` (relative 2-norm).
inline void expect_matches_reference(const WorkerRun& run, const std::vector<Expected>& expected,
                                     double tolerance)
{
    ASSERT_EQ(run.records.size(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        const Reconstruction& r = run.records[k];
        SCOPED_TRACE("frame " + std::to_string(expected[k].frame_id));
        EXPECT_EQ(r.frame_id, expected[k].frame_id);
        EXPECT_EQ(run.image_ids.at(k), expected[k].frame_id);
        EXPECT_EQ(r.result.status, expected[k].status);
        ASSERT_EQ(r.image.size(), expected[k].image.size());
        if (expected[k].status == recon::SolveStatus::non_finite) continue;
        EXPECT_LE(recon::test::rel_error(r.image, expected[k].image), tolerance);
    }
}

/// Frames of one sensor in flight around bad ones: a frame of the wrong
/// length (rejected when submitted) and a frame with a NaN (its solve stops
/// non_finite, so the next frame of its sensor, already in flight on a GPU,
/// must start from zeros, not from the frame before).
inline MultiSensorScenario bad_frames_scenario(std::mt19937_64& rng)
{
    MultiSensorScenario s;
    s.specs = {{"a", synthetic_spec(700, 120, rng())}, {"b", synthetic_spec(500, 80, rng())}};
    const auto good = [&](const std::string& name, std::int64_t id) {
        return make_frame(name, id,
                          recon::test::random_vector(
                              static_cast<std::size_t>(s.specs.at(name).rows), rng));
    };
    s.frames.push_back(good("a", 0));
    s.frames.push_back(good("a", 1));
    s.frames.push_back(make_frame("a", 2, recon::test::random_vector(699, rng)));  // short
    s.frames.push_back(good("a", 3));
    auto poisoned = good("a", 4);
    poisoned.data[17] = std::numeric_limits<float>::quiet_NaN();
    s.frames.push_back(poisoned);
    s.frames.push_back(good("a", 5));  // must start from zeros
    s.frames.push_back(good("b", 6));
    s.frames.push_back(good("a", 7));
    s.frames.push_back(make_frame("nobody", 8, recon::test::random_vector(10, rng)));
    s.frames.push_back(good("b", 9));
    return s;
}

/// The errors bad_frames_scenario must produce: one line each for frame 2
/// (length) and frame 8 (unknown sensor).
inline void expect_bad_frame_errors(const std::vector<std::string>& errors)
{
    ASSERT_EQ(errors.size(), 2U);
    const auto has = [&](const std::string& text) {
        for (const auto& e : errors) {
            if (e.find(text) != std::string::npos) return true;
        }
        return false;
    };
    EXPECT_TRUE(has("frame 2: expected 700 measurements")) << errors[0] << " | " << errors[1];
    EXPECT_TRUE(has("found 699")) << errors[0] << " | " << errors[1];
    EXPECT_TRUE(has("sensor 'nobody'")) << errors[0] << " | " << errors[1];
}

}  // namespace recon::pipeline::test
