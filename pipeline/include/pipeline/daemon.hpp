#pragma once
// Pieces of `recon daemon` (DESIGN §7): the channel -> sensor map, the
// series state machine that judges every message of a Stream V2 series, and
// the daemon's own sinks (end-to-end latency and metrics, ZeroMQ PUB).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/latency_report.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/sink.hpp"
#include "stream/messages.hpp"

namespace recon::stream {
class Publisher;
}

namespace recon::pipeline {

/// Which stream channel feeds which sensor: "det0=front,det1=side" or
/// "sensor0,sensor1" (channel and sensor of the same name).
class ChannelMap {
public:
    /// Throws std::invalid_argument naming daemon.channels.
    static ChannelMap parse(const std::string& text);

    /// The sensor a channel feeds, or nothing for an unmapped channel.
    std::optional<std::string> sensor(const std::string& channel) const;
    std::vector<std::string> sensors() const;
    const std::map<std::string, std::string>& entries() const { return sensor_of_; }

private:
    std::map<std::string, std::string> sensor_of_;
};

/// What the series tracker says about an image message.
enum class ImageVerdict {
    accept,         // reconstruct it
    before_start,   // no series is open
    wrong_series,   // series_unique_id of another series
    duplicate,      // this image_id was seen in this series
    id_out_of_range // image_id too large to track
};

const char* to_string(ImageVerdict verdict);

/// Per-series counts, reported when a series closes.
struct SeriesReport {
    std::string unique_id;
    std::uint64_t series_id = 0;
    std::uint64_t expected = 0;     // number_of_images from start (0: unknown)
    std::int64_t received = 0;      // distinct image_ids accepted
    std::int64_t duplicates = 0;
    std::int64_t out_of_order = 0;  // accepted below the highest id seen
    std::int64_t missing = 0;       // image_ids never received (final at close)
    std::string closed_by;          // "end", "timeout", "new start", "shutdown"
};

/// The state machine of Stream V2 series: start opens, image must belong to
/// the open series with a new image_id, end closes. Not thread-safe.
class SeriesTracker {
public:
    /// ids up to this are tracked (a bitmap; 2^26 ids = 8 MiB).
    static constexpr std::uint64_t max_image_id = std::uint64_t{1} << 26;

    /// Opens a series; a series still open is closed first and returned.
    std::optional<SeriesReport> start(const stream::StartMessage& start);
    /// Judges an image; counts it when accepted.
    ImageVerdict image(const stream::ImageMessage& image);
    /// Whether the last accepted image arrived below the highest id seen.
    bool last_out_of_order() const { return last_out_of_order_; }
    /// Closes the open series when `end` names it; nothing otherwise.
    std::optional<SeriesReport> end(const stream::EndMessage& end, bool* unknown = nullptr);
    /// Closes the open series (timeout, shutdown).
    std::optional<SeriesReport> close(const std::string& reason);

    bool open() const { return open_; }
    const stream::StartMessage& current() const { return start_; }

private:
    SeriesReport finish(const std::string& reason);

    bool open_ = false;
    stream::StartMessage start_;
    SeriesReport report_;
    std::vector<bool> seen_;
    std::uint64_t next_id_ = 0;  // one past the highest id seen
    std::int64_t gaps_ = 0;      // ids skipped so far, minus late arrivals
    bool last_out_of_order_ = false;
};

/// Records end-to-end latency (image published -> image written, from the
/// frame's timestamp_ns, the producer's publish time) and feeds the metrics:
/// histograms per stage and counters per sensor. Add it after the file
/// writer so that "written" means written.
class StreamLatencySink final : public FrameSink {
public:
    StreamLatencySink(MetricsRegistry& metrics, double budget_ms);

    void write_image(const Reconstruction& frame) override;
    void write_record(const Reconstruction& frame) override;

    /// End-to-end latencies (ms) of every frame written.
    const std::vector<double>& end_to_end_ms() const { return end_to_end_; }
    std::int64_t missed() const { return missed_; }
    /// The end-to-end latency of the frame (when written), for the PUB record.
    std::optional<double> end_to_end_of(const std::string& sensor, std::int64_t frame_id) const;

private:
    MetricsRegistry& metrics_;
    double budget_ms_;
    std::map<std::pair<std::string, std::int64_t>, double> pending_;   // written, not yet recorded
    std::map<std::pair<std::string, std::int64_t>, double> last_e2e_;  // recent records, for PUB
    std::vector<double> end_to_end_;
    std::int64_t missed_ = 0;
};

/// Publishes each image on a ZeroMQ PUB socket: three parts, the sensor
/// name (topic), a Stream V2 `image` message holding the float32 image
/// [ny, nx] under channel = sensor, and the frame's JSON latency record.
class PublishSink final : public FrameSink {
public:
    /// Binds `endpoint`; throws std::runtime_error naming it.
    PublishSink(const std::string& endpoint, double budget_ms, const StreamLatencySink* latency);
    ~PublishSink() override;

    void write_record(const Reconstruction& frame) override;
    const std::string& endpoint() const;

private:
    std::unique_ptr<stream::Publisher> publisher_;
    double budget_ms_;
    const StreamLatencySink* latency_;
};

/// FrameLatency of a reconstruction (what the JSONL record holds).
FrameLatency frame_latency(const Reconstruction& frame);

}  // namespace recon::pipeline
