// `recon simulate --serve` (a DECTRIS Stream V2 producer) and `recon daemon`
// (a Stream V2 consumer that reconstructs every frame): DESIGN §7.

#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pipeline/commands.hpp"
#include "pipeline/daemon.hpp"
#include "pipeline/device.hpp"
#include "pipeline/frame_pipeline.hpp"
#include "pipeline/hdf5_output.hpp"
#include "pipeline/latency_plot.hpp"
#include "pipeline/latency_report.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/run_config.hpp"
#include "pipeline/stream_serve.hpp"
#include "pipeline/stream_signals.hpp"
#include "pipeline/version.hpp"
#include "sensors/preprocess.hpp"
#include "sensors/recording.hpp"
#include "sensors/simulator.hpp"
#include "stream/codec.hpp"
#include "stream/transport.hpp"

namespace recon::pipeline {
namespace {

using namespace std::chrono_literals;

stream::Compression parse_compression(const std::string& text)
{
    if (text == "none") return stream::Compression::none;
    if (text == "lz4") return stream::Compression::lz4;
    if (text == "bslz4") return stream::Compression::bslz4;
    throw std::invalid_argument{"serve.compression: expected none, lz4 or bslz4, found '" + text + "'"};
}

std::vector<std::uint64_t> frame_shape(const recon::SystemSpec& spec, std::int64_t m)
{
    if (spec.geometry == "parallel2d") {
        const auto views = spec.angles_deg.empty() ? spec.views
                                                   : static_cast<index_t>(spec.angles_deg.size());
        const auto bins = spec.bins > 0 ? spec.bins : spec.nx;
        if (static_cast<std::int64_t>(views) * bins == m) {
            return {static_cast<std::uint64_t>(views), static_cast<std::uint64_t>(bins)};
        }
    }
    return {static_cast<std::uint64_t>(m)};
}

// --- simulate --serve ------------------------------------------------------------

struct ServeConfig {
    std::string endpoint = "tcp://*:31001";
    double rate_hz = 10.0;
    std::string recording;
    std::string compression = "bslz4";
    int series = 1;
    double wait_s = 30.0;  // for a consumer to connect
    int distinct_frames = 16;  // phantom frames simulated, then repeated

    void validate() const
    {
        if (!(rate_hz > 0.0) || !std::isfinite(rate_hz)) {
            throw std::invalid_argument{"serve.rate_hz: expected a frame rate > 0, found " +
                                        std::to_string(rate_hz)};
        }
        if (series < 1) throw std::invalid_argument{"serve.series: expected at least 1, found " + std::to_string(series)};
        if (distinct_frames < 1) {
            throw std::invalid_argument{"serve.distinct_frames: expected at least 1, found " +
                                        std::to_string(distinct_frames)};
        }
        parse_compression(compression);
    }
};

po::options_description serve_options(ServeConfig& c)
{
    po::options_description d{"[serve] Stream V2 producer"};
    d.add_options()
        ("serve.endpoint", po::value(&c.endpoint)->default_value(c.endpoint), "ZeroMQ PUSH endpoint to bind")
        ("serve.rate_hz", po::value(&c.rate_hz)->default_value(c.rate_hz), "images per second")
        ("serve.recording", po::value(&c.recording)->default_value(c.recording),
         "play this recording instead of a live phantom")
        ("serve.compression", po::value(&c.compression)->default_value(c.compression), "none | lz4 | bslz4")
        ("serve.series", po::value(&c.series)->default_value(c.series), "series to send, one after another")
        ("serve.wait_s", po::value(&c.wait_s)->default_value(c.wait_s),
         "give up when no consumer connects within this (s)")
        ("serve.distinct_frames", po::value(&c.distinct_frames)->default_value(c.distinct_frames),
         "phantom: frames simulated, then repeated (keeps high rates cheap)");
    return d;
}

SeriesSource recording_source(const std::string& path)
{
    auto reader = std::make_shared<sensors::RecordingReader>(path);
    SeriesSource source;
    source.dtype = "float32";
    std::map<std::string, std::vector<std::uint64_t>> shapes;
    for (const auto& info : reader->sensors()) {
        source.channels.push_back(info.name);
        source.frames = std::max(source.frames, info.frames);
        shapes[info.name] = frame_shape(info.system, info.measurements);
    }
    source.image = [reader, shapes](std::int64_t k) {
        std::map<std::string, stream::MultiDimArray> arrays;
        for (const auto& info : reader->sensors()) {
            if (k >= info.frames) continue;
            arrays[info.name] = stream::MultiDimArray::from_f32(shapes.at(info.name),
                                                                reader->read_frame(info.name, k).data);
        }
        return arrays;
    };
    return source;
}

SeriesSource phantom_source(const RunConfig& config, int distinct_frames)
{
    sensors::SimulationConfig simulation = simulation_config(config);
    const std::int64_t cycle = std::min<std::int64_t>(distinct_frames, simulation.frames);
    SeriesSource source;
    source.frames = simulation.frames;
    simulation.frames = cycle;
    const std::string dtype = config.simulate.dtype;
    const bool counts = dtype != "float32";
    source.dtype = dtype;
    auto simulator = std::make_shared<sensors::Simulator>(simulation);
    std::vector<std::vector<std::uint64_t>> shapes;
    for (std::size_t s = 0; s < simulator->sensor_count(); ++s) {
        const std::string name = simulator->config().sensors[s].name;
        source.channels.push_back(name);
        const auto m = static_cast<std::size_t>(simulator->model(s).rows());
        shapes.push_back(frame_shape(simulation.sensors[s].system, static_cast<std::int64_t>(m)));
        if (counts) {  // the simulator's raw counts: flat = I0, dark = 0
            source.flatfield[name] = stream::MultiDimArray::from_f32(
                shapes.back(), std::vector<float>(m, static_cast<float>(config.simulate.photons)));
            source.darkfield[name] = stream::MultiDimArray::from_f32(shapes.back(), std::vector<float>(m, 0.0f));
        }
    }
    // Frames are pure functions of (seed, sensor, k): simulate each distinct
    // frame once, on first use, so that high rates cost only the encoding.
    auto cache = std::make_shared<std::map<std::int64_t, std::map<std::string, stream::MultiDimArray>>>();
    source.image = [simulator, shapes, cache, cycle, dtype](std::int64_t k) {
        const std::int64_t key = k % cycle;
        if (auto it = cache->find(key); it != cache->end()) return it->second;
        std::map<std::string, stream::MultiDimArray> arrays;
        for (std::size_t s = 0; s < simulator->sensor_count(); ++s) {
            const auto frame = simulator->frame(s, key);
            const std::string& name = simulator->config().sensors[s].name;
            if (dtype == "uint16") {
                std::vector<std::uint16_t> values(frame.counts.size());
                for (std::size_t i = 0; i < values.size(); ++i) {
                    values[i] = static_cast<std::uint16_t>(std::min<std::uint32_t>(frame.counts[i], 65535));
                }
                arrays[name] = stream::MultiDimArray::from_u16(shapes[s], values);
            } else if (dtype == "uint32") {
                arrays[name] = stream::MultiDimArray::from_u32(shapes[s], frame.counts);
            } else {
                arrays[name] = stream::MultiDimArray::from_f32(shapes[s], frame.frame.data);
            }
        }
        return cache->emplace(key, std::move(arrays)).first->second;
    };
    return source;
}

/// Sends `bytes`, retrying while no consumer is connected, until `deadline`
/// (or, when `stop_on_signal`, until SIGINT/SIGTERM).
bool send_waiting(stream::Producer& producer, const std::vector<std::uint8_t>& bytes,
                  std::chrono::steady_clock::time_point deadline, bool stop_on_signal)
{
    while (!(stop_on_signal && StopSignals::raised())) {
        if (producer.send(bytes)) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
    }
    return false;
}

}  // namespace

int serve_command(const Args& args)
{
    RunConfig config;
    ServeConfig serve;
    ConfigLoader loader{"simulate --serve", "stream phantoms or a recording as DECTRIS Stream V2"};
    loader.add(serve_options(serve));
    add_run_options(loader, config, /*with_input=*/false);
    loader.add_alias("--serve", "serve.endpoint");
    loader.add_alias("--rate", "serve.rate_hz");
    loader.add_alias("--recording", "serve.recording");
    loader.add_alias("--compression", "serve.compression");
    loader.add_alias("--series", "serve.series");
    if (!loader.parse(args, std::cout)) return 0;
    serve.validate();
    const stream::EncodeOptions encoding{parse_compression(serve.compression), 0};
    SeriesSource source;
    if (!serve.recording.empty()) {
        source = recording_source(serve.recording);
    } else {
        source = phantom_source(config, serve.distinct_frames);
    }

    StopSignals signals;
    stream::Producer producer{serve.endpoint, {std::chrono::milliseconds{200}, 1000}};
    std::cerr << "serve: " << producer.endpoint() << ", " << source.channels.size() << " channels ("
              << source.dtype << ", " << serve.compression << "), " << source.frames
              << " images per series at " << serve.rate_hz << " Hz, " << serve.series
              << " series" << std::endl;
    std::int64_t sent = 0, failed = 0;
    const auto period = std::chrono::duration<double>(1.0 / serve.rate_hz);
    const auto wall_ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    };
    for (int s = 0; s < serve.series && !StopSignals::raised(); ++s) {
        stream::StartMessage start;
        start.series_id = static_cast<std::uint64_t>(s + 1);
        start.series_unique_id = "series-" + std::to_string(wall_ns()) + "-" + std::to_string(s + 1);
        start.channels = source.channels;
        start.number_of_images = static_cast<std::uint64_t>(source.frames);
        start.image_dtype = source.dtype;
        start.frame_time = 1.0 / serve.rate_hz;
        start.flatfield = source.flatfield;
        start.darkfield = source.darkfield;
        const auto wait_until = std::chrono::steady_clock::now() +
                                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(serve.wait_s));
        if (!send_waiting(producer, stream::encode_message(start, encoding), wait_until, true)) {
            if (StopSignals::raised()) break;
            throw std::runtime_error{"serve.endpoint " + producer.endpoint() +
                                     ": no consumer connected within " + std::to_string(serve.wait_s) + " s"};
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (std::int64_t k = 0; k < source.frames && !StopSignals::raised(); ++k) {
            std::this_thread::sleep_until(
                t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(period * static_cast<double>(k)));
            stream::ImageMessage image;
            image.series_id = start.series_id;
            image.series_unique_id = start.series_unique_id;
            image.image_id = static_cast<std::uint64_t>(k);
            image.data = source.image(k);
            image.publish_time_ns = wall_ns();
            if (producer.send(stream::encode_message(image, encoding))) {
                ++sent;
            } else {
                ++failed;
            }
        }
        stream::EndMessage end{start.series_id, start.series_unique_id};
        // Also after a signal: the consumer should see the series end.
        send_waiting(producer, stream::encode_message(end, encoding),
                     std::chrono::steady_clock::now() + 2s, false);
    }
    std::cerr << "serve: sent " << sent << " images" << (failed ? ", " + std::to_string(failed) + " not sent (no consumer)" : "")
              << (StopSignals::raised() ? " (stopped by signal)" : "") << std::endl;
    return 0;
}

}  // namespace recon::pipeline
