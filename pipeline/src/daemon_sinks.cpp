// The daemon's sinks: end-to-end latency with metrics, and the ZeroMQ PUB
// of images (see daemon.hpp).

#include <nlohmann/json.hpp>

#include "pipeline/daemon.hpp"
#include "pipeline/stage_timer.hpp"
#include "stream/codec.hpp"
#include "stream/transport.hpp"

namespace recon::pipeline {

FrameLatency frame_latency(const Reconstruction& r)
{
    FrameLatency f;
    f.sensor = r.sensor;
    f.frame_id = r.frame_id;
    f.t_arrival_ns = r.t_arrival_ns;
    f.times = r.times;
    f.iterations = r.result.iterations;
    f.rel_gradient = r.result.rel_gradient;
    f.status = r.result.status;
    f.missed = r.deadline_missed;
    f.quality = r.quality;
    return f;
}

StreamLatencySink::StreamLatencySink(MetricsRegistry& metrics, double budget_ms)
    : metrics_{metrics}, budget_ms_{budget_ms}
{
}

void StreamLatencySink::write_image(const Reconstruction& frame)
{
    // Called after the file writer's write_image: the image is on disk (flushed).
    const double ms = static_cast<double>(wall_clock_ns() - frame.timestamp_ns) / 1e6;
    pending_[{frame.sensor, frame.frame_id}] = ms;
}

void StreamLatencySink::write_record(const Reconstruction& frame)
{
    const auto key = std::make_pair(frame.sensor, frame.frame_id);
    const auto it = pending_.find(key);
    const double e2e = it != pending_.end() ? it->second : frame.times.total_ms;
    if (it != pending_.end()) pending_.erase(it);
    end_to_end_.push_back(e2e);
    const bool missed = e2e > budget_ms_;
    missed_ += missed ? 1 : 0;

    const auto buckets = latency_buckets_ms();
    for (const Stage stage : all_stages) {
        metrics_.histogram("recon_stage_latency_ms", "time per pipeline stage (ms)", buckets,
                           {{"stage", to_string(stage)}})
            .observe(frame.times[stage]);
    }
    metrics_.histogram("recon_stage_latency_ms", "time per pipeline stage (ms)", buckets,
                       {{"stage", "total"}})
        .observe(frame.times.total_ms);
    metrics_.histogram("recon_end_to_end_latency_ms", "image published to image written (ms)",
                       buckets)
        .observe(e2e);
    metrics_.counter("recon_frames_total", "frames reconstructed and written",
                     {{"sensor", frame.sensor}})
        .add();
    metrics_.counter("recon_deadline_missed_total",
                     "frames whose end-to-end latency exceeded the budget")
        .add(missed ? 1 : 0);
    metrics_.histogram("recon_solver_iterations", "CGNR iterations per frame",
                       {1, 2, 5, 10, 20, 50, 100, 200, 400, 1000})
        .observe(frame.result.iterations);
    last_e2e_[key] = e2e;
    if (last_e2e_.size() > 256) last_e2e_.erase(last_e2e_.begin());
}

std::optional<double> StreamLatencySink::end_to_end_of(const std::string& sensor,
                                                       std::int64_t frame_id) const
{
    const auto it = last_e2e_.find({sensor, frame_id});
    if (it == last_e2e_.end()) return std::nullopt;
    return it->second;
}

PublishSink::PublishSink(const std::string& endpoint, double budget_ms,
                         const StreamLatencySink* latency)
    : publisher_{std::make_unique<stream::Publisher>(endpoint)}, budget_ms_{budget_ms},
      latency_{latency}
{
}

PublishSink::~PublishSink() = default;

const std::string& PublishSink::endpoint() const { return publisher_->endpoint(); }

void PublishSink::write_record(const Reconstruction& frame)
{
    stream::ImageMessage image;
    image.series_unique_id = "reconstruction";
    image.image_id = static_cast<std::uint64_t>(frame.frame_id);
    image.publish_time_ns = wall_clock_ns();
    image.data[frame.sensor] = stream::MultiDimArray::from_f32(
        {static_cast<std::uint64_t>(frame.shape.ny), static_cast<std::uint64_t>(frame.shape.nx)},
        frame.image);
    nlohmann::json record = to_json(frame_latency(frame), budget_ms_);
    if (latency_) {
        if (const auto e2e = latency_->end_to_end_of(frame.sensor, frame.frame_id)) {
            record["end_to_end_ms"] = *e2e;
        }
    }
    const std::string text = record.dump();
    publisher_->publish(frame.sensor, stream::encode_message(image),
                        {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

}  // namespace recon::pipeline
