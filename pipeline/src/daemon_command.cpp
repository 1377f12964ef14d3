// `recon daemon`: a DECTRIS Stream V2 consumer (ZeroMQ PULL) that
// reconstructs every good frame through the frame pipeline, survives every
// bad message with one log line and a counter, serves Prometheus metrics,
// and on SIGTERM/SIGINT finishes the frames in flight, closes its files and
// exits 0 (DESIGN §7).

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "pipeline/commands.hpp"
#include "pipeline/daemon.hpp"
#include "pipeline/device.hpp"
#include "pipeline/frame_pipeline.hpp"
#include "pipeline/hdf5_output.hpp"
#include "pipeline/latency_plot.hpp"
#include "pipeline/latency_report.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/run_config.hpp"
#include "pipeline/stream_signals.hpp"
#include "pipeline/version.hpp"
#include "sensors/preprocess.hpp"
#include "stream/codec.hpp"
#include "stream/transport.hpp"

namespace recon::pipeline {
namespace {

struct DaemonConfig {
    std::string connect = "tcp://127.0.0.1:31001";
    std::string channels = "sensor0";
    double series_timeout_s = 10.0;
    int max_series = 0;
    double idle_exit_s = 0.0;
    int metrics_port = -1;
    std::string metrics_address = "127.0.0.1";
    std::string publish;
    std::string devices;
    double max_array_mb = 256.0;
    int receive_hwm = 64;
    int log_limit = 20;

    void validate() const
    {
        auto bad = [](const std::string& option, const std::string& expected, const std::string& found) {
            throw std::invalid_argument{"daemon." + option + ": expected " + expected + ", found " + found};
        };
        if (!(series_timeout_s > 0)) bad("series_timeout_s", "a time > 0 s", std::to_string(series_timeout_s));
        if (max_series < 0) bad("max_series", "a count >= 0 (0: no limit)", std::to_string(max_series));
        if (idle_exit_s < 0) bad("idle_exit_s", "a time >= 0 s (0: never)", std::to_string(idle_exit_s));
        if (metrics_port < -1 || metrics_port > 65535) {
            bad("metrics_port", "-1 (off), 0 (any free port) or a port up to 65535", std::to_string(metrics_port));
        }
        if (!(max_array_mb > 0)) bad("max_array_mb", "a size > 0 MB", std::to_string(max_array_mb));
        if (receive_hwm < 1) bad("receive_hwm", "at least 1", std::to_string(receive_hwm));
    }
};

po::options_description daemon_options(DaemonConfig& c)
{
    po::options_description d{"[daemon] live stream"};
    d.add_options()
        ("daemon.connect", po::value(&c.connect)->default_value(c.connect), "producer's PUSH endpoint (PULL connects)")
        ("daemon.channels", po::value(&c.channels)->default_value(c.channels),
         "CHANNEL[=SENSOR],...: stream channels to reconstruct and their sensor names")
        ("daemon.series_timeout_s", po::value(&c.series_timeout_s)->default_value(c.series_timeout_s),
         "close an open series after this long without a message (missing end)")
        ("daemon.max_series", po::value(&c.max_series)->default_value(c.max_series),
         "exit after this many series ended (0: run until a signal)")
        ("daemon.idle_exit_s", po::value(&c.idle_exit_s)->default_value(c.idle_exit_s),
         "exit after this long without any message (0: never)")
        ("daemon.metrics_port", po::value(&c.metrics_port)->default_value(c.metrics_port),
         "Prometheus metrics on http://ADDRESS:PORT/metrics (-1: off, 0: any free port)")
        ("daemon.metrics_address", po::value(&c.metrics_address)->default_value(c.metrics_address),
         "IPv4 address of the metrics endpoint")
        ("daemon.publish", po::value(&c.publish)->default_value(c.publish),
         "ZeroMQ PUB endpoint for images and latency records (empty: off)")
        ("daemon.devices", po::value(&c.devices)->default_value(c.devices),
         "CUDA devices, e.g. 0,1: one pipeline per GPU (empty: pipeline.device)")
        ("daemon.max_array_mb", po::value(&c.max_array_mb)->default_value(c.max_array_mb),
         "largest decompressed array accepted (MB; decompression-bomb guard)")
        ("daemon.receive_hwm", po::value(&c.receive_hwm)->default_value(c.receive_hwm),
         "messages ZeroMQ may hold before the producer waits")
        ("daemon.log_limit", po::value(&c.log_limit)->default_value(c.log_limit),
         "bad messages logged per kind before logging every 100th");
    return d;
}

std::vector<int> parse_devices(const std::string& text)
{
    std::vector<int> devices;
    std::stringstream items{text};
    std::string item;
    while (std::getline(items, item, ',')) {
        std::size_t used = 0;
        int device = -1;
        try {
            device = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || device < 0) {
            throw std::invalid_argument{"daemon.devices: expected CUDA device numbers like 0,1, found '" + text + "'"};
        }
        devices.push_back(device);
    }
    return devices;
}

/// Counts and logs the daemon's events: every bad message is one log line
/// (rate-limited per kind) and one counter.
class EventLog {
public:
    EventLog(MetricsRegistry& metrics, int log_limit) : metrics_{metrics}, log_limit_{log_limit} {}

    void bad_message(const std::string& kind, const std::string& reason)
    {
        metrics_.counter("recon_stream_bad_messages_total", "messages rejected, by kind", {{"kind", kind}}).add();
        ++counts_[kind];
        log(kind, "bad message #" + std::to_string(messages_) + " (" + kind + "): " + reason);
    }
    void event(const std::string& counter, const std::string& help, const std::string& kind,
               const std::string& text, std::int64_t n = 1)
    {
        metrics_.counter(counter, help).add(n);
        counts_[kind] += n;
        log(kind, text);
    }
    void message(const std::string& type)
    {
        ++messages_;
        metrics_.counter("recon_stream_messages_total", "messages received, by type", {{"type", type}}).add();
    }
    std::int64_t count(const std::string& kind) const
    {
        const auto it = counts_.find(kind);
        return it == counts_.end() ? 0 : it->second;
    }
    const std::map<std::string, std::int64_t>& counts() const { return counts_; }
    std::int64_t messages() const { return messages_; }

private:
    void log(const std::string& kind, const std::string& line)
    {
        const std::int64_t n = ++logged_[kind];
        if (n <= log_limit_ || n % 100 == 0) {
            std::cerr << "daemon: " << line << (n == log_limit_ ? " (further ones of this kind: every 100th)" : "")
                      << std::endl;
        }
    }

    MetricsRegistry& metrics_;
    int log_limit_;
    std::int64_t messages_ = 0;
    std::map<std::string, std::int64_t> logged_;
    std::map<std::string, std::int64_t> counts_;
};

struct Calibration {
    std::vector<float> dark, flat;
};

/// The receive loop: judges each message and submits good frames.
class StreamConsumer {
public:
    StreamConsumer(const DaemonConfig& config, const ChannelMap& channels,
                   std::vector<std::unique_ptr<FramePipeline>>& pipelines,
                   const std::map<std::string, std::vector<std::uint64_t>>& shapes, EventLog& log,
                   MetricsRegistry& metrics)
        : config_{config}, channels_{channels}, pipelines_{pipelines}, shapes_{shapes}, log_{log},
          metrics_{metrics}
    {
        limits_.max_array_bytes = static_cast<std::size_t>(config.max_array_mb * 1024 * 1024);
        limits_.max_message_bytes = limits_.max_array_bytes * 8;
    }

    /// Handles one message's bytes.
    void handle(const std::vector<std::uint8_t>& bytes)
    {
        stream::Message message;
        try {
            message = stream::decode_message(bytes, limits_);
        } catch (const stream::StreamError& e) {
            log_.message("invalid");
            log_.bad_message(to_string(e.kind()), e.what());
            return;
        }
        std::visit([&](const auto& m) { on(m); }, message);
    }

    /// Closes an open series that has been silent too long.
    void check_timeout(std::chrono::steady_clock::time_point now)
    {
        if (tracker_.open() && now - last_message_ > std::chrono::duration<double>(config_.series_timeout_s)) {
            if (auto report = tracker_.close("timeout")) {
                log_.event("recon_stream_series_timeouts_total", "series closed for lack of an end message",
                           "series_timeout",
                           "series " + report->unique_id + ": no message for " +
                               std::to_string(config_.series_timeout_s) + " s and no end; closed");
                close_series(*report);
            }
        }
    }

    void shutdown()
    {
        if (auto report = tracker_.close("shutdown")) close_series(*report);
    }

    void touch(std::chrono::steady_clock::time_point now) { last_message_ = now; }
    int series_ended() const { return series_ended_; }
    std::int64_t frames_submitted() const { return submitted_; }

private:
    void on(const stream::StartMessage& start)
    {
        log_.message("start");
        if (auto previous = tracker_.start(start)) {
            log_.event("recon_stream_series_unterminated_total", "series closed by a new start (no end)",
                       "series_unterminated",
                       "series " + previous->unique_id + ": new start " + start.series_unique_id +
                           " before its end (producer restart?); closed");
            close_series(*previous);
        }
        calibration_.clear();
        for (const auto& [channel, sensor] : channels_.entries()) {
            Calibration c;
            c.flat = calibration_array(start.flatfield, channel, "flatfield");
            c.dark = calibration_array(start.darkfield, channel, "darkfield");
            calibration_[channel] = std::move(c);
        }
        std::cerr << "daemon: series " << start.series_unique_id << " started ("
                  << start.number_of_images << " images, channels";
        for (const auto& c : start.channels) std::cerr << " " << c;
        std::cerr << ")" << std::endl;
    }

    std::vector<float> calibration_array(const std::map<std::string, stream::MultiDimArray>& arrays,
                                         const std::string& channel, const char* what)
    {
        const auto it = arrays.find(channel);
        if (it == arrays.end()) return {};
        const auto expected = element_count(channel);
        if (it->second.element_count() != expected) {
            log_.event("recon_stream_shape_mismatch_total", "arrays whose shape disagrees with the sensor",
                       "shape_mismatch",
                       std::string{"start: "} + what + " of channel " + channel + " has " +
                           std::to_string(it->second.element_count()) + " values, expected " +
                           std::to_string(expected) + "; ignored");
            return {};
        }
        return it->second.to_float();
    }

    std::uint64_t element_count(const std::string& channel) const
    {
        std::uint64_t n = 1;
        for (auto d : shapes_.at(*channels_.sensor(channel))) n *= d;
        return n;
    }

    void on(const stream::ImageMessage& image)
    {
        log_.message("image");
        const ImageVerdict verdict = tracker_.image(image);
        if (verdict != ImageVerdict::accept) {
            const std::string kind = to_string(verdict);
            metrics_.counter("recon_stream_bad_messages_total", "messages rejected, by kind", {{"kind", kind}}).add();
            log_.event("recon_stream_rejected_images_total", "image messages not reconstructed", kind,
                       "image " + std::to_string(image.image_id) + " of series '" +
                           image.series_unique_id.substr(0, 64) + "' rejected: " + kind);
            return;
        }
        if (tracker_.last_out_of_order()) {
            log_.event("recon_stream_out_of_order_total", "images that arrived after a higher image_id",
                       "out_of_order", "image " + std::to_string(image.image_id) + " arrived out of order");
        }
        for (const auto& [channel, array] : image.data) submit_channel(image, channel, array);
    }

    void submit_channel(const stream::ImageMessage& image, const std::string& channel,
                        const stream::MultiDimArray& array)
    {
        const auto sensor = channels_.sensor(channel);
        if (!sensor) {
            if (unmapped_.insert(channel).second) {
                log_.event("recon_stream_unmapped_channels_total", "channels without a sensor (first sight)",
                           "unmapped_channel", "channel '" + channel.substr(0, 64) +
                                                   "' is not in daemon.channels; its data are skipped");
            }
            return;
        }
        const auto& shape = shapes_.at(*sensor);
        if (!shape_matches(array.shape, shape)) {
            log_.event("recon_stream_shape_mismatch_total", "arrays whose shape disagrees with the sensor",
                       "shape_mismatch",
                       "image " + std::to_string(image.image_id) + " channel " + channel + ": shape " +
                           shape_text(array.shape) + ", sensor " + *sensor + " expects " + shape_text(shape));
            return;
        }
        sensors::Frame frame;
        frame.sensor = *sensor;
        frame.frame_id = static_cast<std::int64_t>(image.image_id);
        frame.timestamp_ns = image.publish_time_ns.value_or(wall_clock_ns());
        frame.data = array.to_float();
        if (array.dtype != stream::DType::f32) {
            const Calibration& c = calibration_[channel];
            sensors::counts_to_line_integrals(frame.data, c.dark, c.flat, frame.data);
        } else if (!all_finite(frame.data)) {
            log_.event("recon_stream_bad_values_total", "float32 images holding NaN or Inf", "bad_values",
                       "image " + std::to_string(image.image_id) + " channel " + channel +
                           ": NaN or Inf in the data; skipped");
            return;
        }
        FramePipeline& pipeline = *pipelines_[next_pipeline_++ % pipelines_.size()];
        const PushResult result = pipeline.submit(std::move(frame));
        ++submitted_;
        if (result == PushResult::dropped || result == PushResult::accepted_dropped_oldest) {
            log_.event("recon_frames_dropped_total", "frames dropped by the queue's drop policy", "dropped",
                       "queue full: a frame was dropped (" +
                           std::string{result == PushResult::dropped ? "newest" : "oldest"} + ")");
        }
    }

    static bool all_finite(const std::vector<float>& values)
    {
        for (float v : values) {
            if (!std::isfinite(v)) return false;
        }
        return true;
    }

    static bool shape_matches(const std::vector<std::uint64_t>& got, const std::vector<std::uint64_t>& want)
    {
        if (got == want) return true;
        // A flat [m] for a [views, bins] sensor, or the reverse, is the same data.
        std::uint64_t a = 1, b = 1;
        for (auto d : got) a *= d;
        for (auto d : want) b *= d;
        return a == b && (got.size() == 1 || want.size() == 1);
    }

    static std::string shape_text(const std::vector<std::uint64_t>& shape)
    {
        std::string text = "[";
        for (std::size_t i = 0; i < shape.size(); ++i) {
            if (i > 0) text += ',';
            text += std::to_string(shape[i]);
        }
        text += ']';
        return text;
    }

    void on(const stream::EndMessage& end)
    {
        log_.message("end");
        bool unknown = false;
        if (auto report = tracker_.end(end, &unknown)) {
            close_series(*report);
            return;
        }
        metrics_.counter("recon_stream_bad_messages_total", "messages rejected, by kind",
                         {{"kind", "end_without_series"}}).add();
        log_.event("recon_stream_rejected_ends_total", "end messages that close no open series",
                   "end_without_series", "end of series '" + end.series_unique_id.substr(0, 64) +
                                             "' which is not open; ignored");
    }

    void close_series(const SeriesReport& report)
    {
        ++series_ended_;
        if (report.missing > 0) {
            log_.event("recon_stream_missing_images_total", "image_ids never received in a series",
                       "missing_images",
                       "series " + report.unique_id + ": " + std::to_string(report.missing) +
                           " images missing", report.missing);
        }
        std::cerr << "daemon: series " << report.unique_id << " closed by " << report.closed_by << ": "
                  << report.received << " images received, " << report.missing << " missing, "
                  << report.duplicates << " duplicates, " << report.out_of_order << " out of order"
                  << std::endl;
    }

    const DaemonConfig& config_;
    const ChannelMap& channels_;
    std::vector<std::unique_ptr<FramePipeline>>& pipelines_;
    const std::map<std::string, std::vector<std::uint64_t>>& shapes_;
    EventLog& log_;
    MetricsRegistry& metrics_;
    stream::DecodeLimits limits_;
    SeriesTracker tracker_;
    std::map<std::string, Calibration> calibration_;
    std::set<std::string> unmapped_;
    std::chrono::steady_clock::time_point last_message_ = std::chrono::steady_clock::now();
    std::size_t next_pipeline_ = 0;
    int series_ended_ = 0;
    std::int64_t submitted_ = 0;
};

void make_parent_dir(const std::string& path)
{
    const auto parent = std::filesystem::path{path}.parent_path();
    if (parent.empty()) return;
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
        throw std::runtime_error{"output folder '" + parent.string() + "': cannot be created (" +
                                 error.message() + ")"};
    }
}

std::vector<std::uint64_t> sensor_shape(const recon::SystemSpec& spec, std::int64_t m)
{
    if (spec.geometry == "parallel2d") {
        const auto bins = spec.bins > 0 ? spec.bins : spec.nx;
        if (static_cast<std::int64_t>(spec.views) * bins == m) {
            return {static_cast<std::uint64_t>(spec.views), static_cast<std::uint64_t>(bins)};
        }
    }
    return {static_cast<std::uint64_t>(m)};
}

nlohmann::json distribution_json(const Distribution& d)
{
    return {{"min", d.min}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}, {"mean", d.mean}};
}

}  // namespace

int daemon_command(const Args& args)
{
    RunConfig config;
    DaemonConfig daemon;
    ConfigLoader loader{"daemon", "reconstruct frames of a live DECTRIS Stream V2 stream"};
    loader.add(daemon_options(daemon));
    add_run_options(loader, config, /*with_input=*/false);
    loader.add_alias("--connect", "daemon.connect");
    loader.add_alias("--channels", "daemon.channels");
    loader.add_alias("--metrics-port", "daemon.metrics_port");
    loader.add_alias("--publish", "daemon.publish");
    loader.add_alias("--devices", "daemon.devices");
    loader.add_alias("--max-series", "daemon.max_series");
    loader.add_alias("--idle-exit", "daemon.idle_exit_s");
    loader.add_alias("--series-timeout", "daemon.series_timeout_s");
    loader.add_alias("--output", "output.dir");
    if (!loader.parse(args, std::cout)) return 0;
    daemon.validate();
    // Live data: a full queue drops the oldest frame unless told otherwise.
    if (loader.values()["pipeline.drop_policy"].defaulted()) config.pipeline.drop_policy = "drop_oldest";
    config.pipeline.validate();
    const ChannelMap channels = ChannelMap::parse(daemon.channels);

    PipelineSetup setup;
    setup.solve.solver = config.solver.options();
    setup.solve.regularizer = config.solver.make_regularizer();
    setup.solve.warm_start = config.pipeline.warm_start;
    setup.solve.budget_ms = config.pipeline.budget_ms;
    setup.workers = config.pipeline.workers;
    setup.queue_capacity = config.pipeline.queue_capacity;
    setup.drop_policy = parse_drop_policy(config.pipeline.drop_policy);
    set_cpu_threads(config.pipeline.threads);
    const recon::SystemSpec spec = config.system.resolved();
    for (const auto& sensor : channels.sensors()) setup.sensors.emplace(sensor, spec);

    std::vector<kernels::Executor> executors;
    if (daemon.devices.empty()) {
        executors.push_back(select_device(config.pipeline.device));
    } else {
        if (!kernels::cuda_compiled()) {
            throw std::runtime_error{"daemon.devices: expected CUDA devices, found a build without the CUDA backend"};
        }
        for (int device : parse_devices(daemon.devices)) {
            if (device >= kernels::cuda_device_count()) {
                throw std::runtime_error{"daemon.devices: device " + std::to_string(device) + " not present (" +
                                         std::to_string(kernels::cuda_device_count()) + " found)"};
            }
            executors.push_back(kernels::Executor::cuda(device));
        }
    }
    std::string device = kernels::device_name(executors.front());
    for (std::size_t i = 1; i < executors.size(); ++i) device += ", " + kernels::device_name(executors[i]);

    const OutputConfig& out = config.output;
    for (const auto& path : {out.file_path(), out.report_path(), out.summary_path(), out.plot_path()}) {
        make_parent_dir(path);
    }
    MetricsRegistry metrics;
    SinkSet sinks;
    auto writer = std::make_shared<Hdf5OutputWriter>(
        out.file_path(), OutputParameters{loader.effective_text(), program_version(), device,
                                          config.pipeline.budget_ms});
    auto recorder = std::make_shared<LatencyRecorder>(out.report_path(), config.pipeline.budget_ms, device);
    auto latency = std::make_shared<StreamLatencySink>(metrics, config.pipeline.budget_ms);
    sinks.add(writer);
    sinks.add(recorder);
    sinks.add(latency);
    std::shared_ptr<PublishSink> publisher;
    if (!daemon.publish.empty()) {
        publisher = std::make_shared<PublishSink>(daemon.publish, config.pipeline.budget_ms, latency.get());
        sinks.add(publisher);
    }

    std::vector<std::unique_ptr<FramePipeline>> pipelines;
    for (const auto& exec : executors) {
        PipelineSetup one = setup;
        one.exec = exec;
        pipelines.push_back(std::make_unique<FramePipeline>(one, sinks));
    }
    std::map<std::string, std::vector<std::uint64_t>> shapes;
    for (const auto& sensor : channels.sensors()) {
        shapes[sensor] = sensor_shape(spec, pipelines.front()->models().get(sensor).rows());
    }

    EventLog log{metrics, daemon.log_limit};
    metrics.gauge("recon_up", "1 while the daemon runs", [] { return 1.0; });
    std::unique_ptr<MetricsServer> server;
    if (daemon.metrics_port >= 0) {
        server = std::make_unique<MetricsServer>(metrics, daemon.metrics_address, daemon.metrics_port);
        std::cerr << "daemon: metrics: http://" << daemon.metrics_address << ":" << server->port()
                  << "/metrics" << std::endl;
    }
    stream::ReceiverOptions receive_options;
    receive_options.receive_timeout = std::chrono::milliseconds{100};
    receive_options.high_water_mark = daemon.receive_hwm;
    stream::Receiver receiver{daemon.connect, receive_options};
    std::cerr << "daemon: " << daemon.connect << " -> " << channels.sensors().size() << " sensors on "
              << device << ", queue " << config.pipeline.queue_capacity << " ("
              << config.pipeline.drop_policy << "), output " << out.file_path()
              << (publisher ? ", publishing on " + publisher->endpoint() : "") << std::endl;

    StopSignals signals;
    StreamConsumer consumer{daemon, channels, pipelines, shapes, log, metrics};
    auto last_message = std::chrono::steady_clock::now();
    std::string stopped_by = "signal";
    while (!signals.raised()) {
        auto bytes = receiver.receive();
        const auto now = std::chrono::steady_clock::now();
        if (bytes) {
            last_message = now;
            consumer.touch(now);
            consumer.handle(*bytes);
        } else {
            consumer.check_timeout(now);
            if (daemon.idle_exit_s > 0 && now - last_message > std::chrono::duration<double>(daemon.idle_exit_s)) {
                stopped_by = "idle timeout";
                break;
            }
        }
        if (daemon.max_series > 0 && consumer.series_ended() >= daemon.max_series) {
            stopped_by = "max_series";
            break;
        }
    }
    if (signals.raised()) {
        std::cerr << "daemon: " << (signals.raised() == SIGINT ? "SIGINT" : "SIGTERM")
                  << ": finishing the frames in flight" << std::endl;
    }
    consumer.shutdown();
    std::int64_t dropped = 0, failed = 0;
    for (auto& pipeline : pipelines) {
        pipeline->finish();
        dropped += pipeline->dropped();
        failed += pipeline->errors().count();
        for (const auto& message : pipeline->errors().first()) {
            std::cerr << "daemon: frame failed: " << message << std::endl;
        }
    }
    sinks.close();
    server.reset();

    recorder->add_dropped(dropped);
    recorder->add_failed(failed);
    const LatencySummary summary = recorder->summary();
    print_summary(summary, std::cout);
    nlohmann::json json = to_json(summary);
    nlohmann::json stream_json;
    stream_json["messages"] = log.messages();
    stream_json["frames_submitted"] = consumer.frames_submitted();
    stream_json["series_ended"] = consumer.series_ended();
    stream_json["stopped_by"] = stopped_by;
    for (const auto& [kind, count] : log.counts()) stream_json["events"][kind] = count;
    json["stream"] = stream_json;
    const auto& e2e = latency->end_to_end_ms();
    if (!e2e.empty()) {
        const Distribution d = distribution(e2e);
        json["end_to_end_ms"] = distribution_json(d);
        json["end_to_end_missed"] = latency->missed();
        std::cout << "end to end (published -> written): p50 " << d.p50 << " ms, p99 " << d.p99
                  << " ms, max " << d.max << " ms; " << latency->missed() << " of " << e2e.size()
                  << " over the " << config.pipeline.budget_ms << " ms budget\n";
    }
    std::cout << "stream: " << log.messages() << " messages";
    for (const auto& [kind, count] : log.counts()) std::cout << ", " << kind << " " << count;
    std::cout << "; stopped by " << stopped_by << "\n";
    {
        std::ofstream file{out.summary_path()};
        if (!file) throw std::runtime_error{"output.summary '" + out.summary_path() + "': cannot be written"};
        file << json.dump(2) << "\n";
    }
    if (!recorder->frames().empty()) {
        write_latency_svg(recorder->frames(), config.pipeline.budget_ms,
                          "recon daemon " + daemon.connect + " — " + device, out.plot_path());
    }
    std::cout << "output: " << out.file_path() << "\nreport: " << out.report_path()
              << "\nsummary: " << out.summary_path() << std::endl;
    return 0;
}

}  // namespace recon::pipeline
