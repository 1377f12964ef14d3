// `recon replay`: reconstruct every frame of a recording through the frame
// pipeline, as fast as possible or at the recorded timing, and write the
// output file, the per-frame report, the summary and the latency plot.

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "pipeline/commands.hpp"
#include "pipeline/device.hpp"
#include "pipeline/frame_pipeline.hpp"
#include "pipeline/hdf5_output.hpp"
#include "pipeline/latency_plot.hpp"
#include "pipeline/latency_report.hpp"
#include "pipeline/run_config.hpp"
#include "pipeline/version.hpp"
#include "sensors/recording.hpp"

namespace recon::pipeline {

namespace {

/// Frames of all sensors of a recording in timestamp order: keeps the next
/// frame of each sensor and hands out the earliest.
class RecordingFrames {
public:
    explicit RecordingFrames(const sensors::RecordingReader& reader) : reader_{reader}
    {
        for (const auto& info : reader_.sensors()) load(info.name, 0);
    }

    /// The next frame in time, or nothing when every sensor is exhausted.
    std::optional<sensors::Frame> next()
    {
        const sensors::Frame* earliest = nullptr;
        for (const auto& [name, frame] : next_) {
            if (earliest == nullptr || frame.timestamp_ns < earliest->timestamp_ns) {
                earliest = &frame;
            }
        }
        if (earliest == nullptr) return std::nullopt;
        sensors::Frame out = *earliest;
        const std::int64_t k = index_[out.sensor] + 1;
        next_.erase(out.sensor);
        load(out.sensor, k);
        return out;
    }

    /// Index of `frame` within its sensor (what ground_truth() takes).
    std::int64_t index_of(const sensors::Frame& frame) const { return index_.at(frame.sensor) - 1; }

private:
    void load(const std::string& sensor, std::int64_t k)
    {
        index_[sensor] = k;
        if (k < reader_.sensor(sensor).frames) next_.emplace(sensor, reader_.read_frame(sensor, k));
    }

    const sensors::RecordingReader& reader_;
    std::map<std::string, sensors::Frame> next_;
    std::map<std::string, std::int64_t> index_;
};

void make_parent_dir(const std::string& path)
{
    const auto parent = std::filesystem::path{path}.parent_path();
    if (parent.empty()) return;
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
        throw std::runtime_error{"output folder '" + parent.string() +
                                 "': cannot be created (" + error.message() + ")"};
    }
}

}  // namespace

int replay_command(const Args& args)
{
    RunConfig config;
    ConfigLoader loader{"replay", "reconstruct every frame of a recording"};
    add_run_options(loader, config, /*with_input=*/true);
    loader.add_alias("--output", "output.dir");
    if (!loader.parse(args, std::cout)) return 0;
    if (config.input.empty()) {
        throw std::invalid_argument{"input: expected a recording file (recon replay FILE), found none"};
    }
    config.pipeline.validate();
    PipelineSetup setup;
    setup.solve.solver = config.solver.options();
    setup.solve.regularizer = config.solver.make_regularizer();
    setup.solve.warm_start = config.pipeline.warm_start;
    setup.solve.budget_ms = config.pipeline.budget_ms;
    setup.workers = config.pipeline.workers;
    setup.queue_capacity = config.pipeline.queue_capacity;
    setup.drop_policy = parse_drop_policy(config.pipeline.drop_policy);
    set_cpu_threads(config.pipeline.threads);
    setup.exec = select_device(config.pipeline.device);
    const recon::SystemSpec overrides = config.system.resolved();

    const sensors::RecordingReader reader{config.input};
    for (const auto& info : reader.sensors()) {
        recon::SystemSpec spec = info.system;
        spec.materialize = overrides.materialize;
        spec.layout = overrides.layout;
        setup.sensors.emplace(info.name, spec);
    }
    const std::string device = kernels::device_name(setup.exec);
    const OutputConfig& out = config.output;
    for (const auto& path : {out.file_path(), out.report_path(), out.summary_path(), out.plot_path()}) {
        make_parent_dir(path);
    }

    SinkSet sinks;
    auto writer = std::make_shared<Hdf5OutputWriter>(
        out.file_path(), OutputParameters{loader.effective_text(), program_version(), device,
                                          config.pipeline.budget_ms});
    auto recorder =
        std::make_shared<LatencyRecorder>(out.report_path(), config.pipeline.budget_ms, device);
    sinks.add(writer);
    sinks.add(recorder);

    FramePipeline pipeline{setup, sinks};
    for (const auto& info : reader.sensors()) {
        const auto rows = pipeline.models().get(info.name).rows();
        if (info.measurements != rows) {
            throw std::invalid_argument{
                config.input + ": /entry/sensors/" + info.name + "/data: expected " +
                std::to_string(rows) + " values per frame for its " + info.system.geometry +
                " geometry, found " + std::to_string(info.measurements)};
        }
    }

    std::cerr << "replay: " << config.input << " (" << reader.sensors().size()
              << " sensors) on " << device << ", timing " << config.pipeline.timing << "\n";
    const bool recorded = config.pipeline.timing == "recorded";
    RecordingFrames frames{reader};
    std::optional<std::int64_t> t0;
    const auto start = Clock::now();
    while (auto frame = frames.next()) {
        if (recorded) {
            if (!t0) t0 = frame->timestamp_ns;
            std::this_thread::sleep_until(start + std::chrono::nanoseconds{frame->timestamp_ns - *t0});
        } else {
            pipeline.wait_for_room();
        }
        std::optional<std::vector<float>> truth;
        if (reader.sensor(frame->sensor).has_ground_truth) {
            truth = reader.ground_truth(frame->sensor, frames.index_of(*frame));
        }
        pipeline.submit(std::move(*frame), std::move(truth));
    }
    pipeline.finish();
    sinks.close();

    recorder->add_dropped(pipeline.dropped());
    recorder->add_failed(pipeline.errors().count());
    const LatencySummary summary = recorder->summary();
    print_summary(summary, std::cout);
    write_summary_json(summary, out.summary_path());
    write_latency_svg(recorder->frames(), config.pipeline.budget_ms,
                      "recon replay " + config.input + " — " + device, out.plot_path());
    std::int64_t unsolved = 0;
    for (const auto& f : recorder->frames()) {
        unsolved += (f.status == recon::SolveStatus::breakdown ||
                     f.status == recon::SolveStatus::non_finite) ? 1 : 0;
    }
    if (unsolved > 0) {
        std::cerr << "replay: warning: " << unsolved
                  << " frames stopped early (breakdown or non-finite data); see their status\n";
    }
    std::cout << "output: " << out.file_path() << "\nreport: " << out.report_path()
              << "\nsummary: " << out.summary_path() << "\nplot: " << out.plot_path() << "\n";
    if (pipeline.errors().count() > 0) {
        for (const auto& message : pipeline.errors().first()) {
            std::cerr << "recon replay: error: " << message << "\n";
        }
        return 1;
    }
    return 0;
}

}  // namespace recon::pipeline
