// Channel map and the Stream V2 series state machine (see daemon.hpp).

#include <sstream>
#include <stdexcept>

#include "pipeline/daemon.hpp"

namespace recon::pipeline {

ChannelMap ChannelMap::parse(const std::string& text)
{
    ChannelMap map;
    std::stringstream items{text};
    std::string item;
    while (std::getline(items, item, ',')) {
        const auto first = item.find_first_not_of(" \t");
        const auto last = item.find_last_not_of(" \t");
        if (first == std::string::npos) continue;
        item = item.substr(first, last - first + 1);
        const auto eq = item.find('=');
        const std::string channel = item.substr(0, eq);
        const std::string sensor = eq == std::string::npos ? channel : item.substr(eq + 1);
        if (channel.empty() || sensor.empty() || sensor.find('/') != std::string::npos) {
            throw std::invalid_argument{"daemon.channels: expected CHANNEL[=SENSOR],..., found '" +
                                        item + "'"};
        }
        if (!map.sensor_of_.emplace(channel, sensor).second) {
            throw std::invalid_argument{"daemon.channels: channel '" + channel + "' mapped twice"};
        }
    }
    if (map.sensor_of_.empty()) {
        throw std::invalid_argument{"daemon.channels: expected at least one channel, found '" + text + "'"};
    }
    return map;
}

std::optional<std::string> ChannelMap::sensor(const std::string& channel) const
{
    const auto it = sensor_of_.find(channel);
    if (it == sensor_of_.end()) return std::nullopt;
    return it->second;
}

std::vector<std::string> ChannelMap::sensors() const
{
    std::vector<std::string> out;
    for (const auto& [channel, sensor] : sensor_of_) out.push_back(sensor);
    return out;
}

const char* to_string(ImageVerdict verdict)
{
    switch (verdict) {
    case ImageVerdict::accept: return "accept";
    case ImageVerdict::before_start: return "image_before_start";
    case ImageVerdict::wrong_series: return "image_of_another_series";
    case ImageVerdict::duplicate: return "duplicate_image_id";
    case ImageVerdict::id_out_of_range: return "image_id_out_of_range";
    }
    return "unknown";
}

std::optional<SeriesReport> SeriesTracker::start(const stream::StartMessage& start)
{
    std::optional<SeriesReport> previous;
    if (open_) previous = finish("new start");
    open_ = true;
    start_ = start;
    report_ = SeriesReport{};
    report_.unique_id = start.series_unique_id;
    report_.series_id = start.series_id;
    report_.expected = start.number_of_images;
    seen_.clear();
    next_id_ = 0;
    gaps_ = 0;
    return previous;
}

ImageVerdict SeriesTracker::image(const stream::ImageMessage& image)
{
    last_out_of_order_ = false;
    if (!open_) return ImageVerdict::before_start;
    if (image.series_unique_id != start_.series_unique_id) return ImageVerdict::wrong_series;
    const std::uint64_t id = image.image_id;
    if (id >= max_image_id) return ImageVerdict::id_out_of_range;
    if (id >= seen_.size()) seen_.resize(std::max<std::uint64_t>(id + 1, seen_.size() * 2), false);
    if (seen_[id]) {
        ++report_.duplicates;
        return ImageVerdict::duplicate;
    }
    seen_[id] = true;
    ++report_.received;
    if (id < next_id_) {
        // A late arrival fills a gap counted when a higher id came first.
        ++report_.out_of_order;
        --gaps_;
        last_out_of_order_ = true;
    } else {
        gaps_ += static_cast<std::int64_t>(id - next_id_);
        next_id_ = id + 1;
    }
    return ImageVerdict::accept;
}

std::optional<SeriesReport> SeriesTracker::end(const stream::EndMessage& end, bool* unknown)
{
    const bool matches = open_ && end.series_unique_id == start_.series_unique_id;
    if (unknown) *unknown = !matches;
    if (!matches) return std::nullopt;
    return finish("end");
}

std::optional<SeriesReport> SeriesTracker::close(const std::string& reason)
{
    if (!open_) return std::nullopt;
    return finish(reason);
}

SeriesReport SeriesTracker::finish(const std::string& reason)
{
    open_ = false;
    report_.closed_by = reason;
    // Missing: against the announced count when known, else the gaps seen.
    report_.missing = report_.expected > 0
                          ? std::max<std::int64_t>(0, static_cast<std::int64_t>(report_.expected) -
                                                          report_.received)
                          : gaps_;
    return report_;
}

}  // namespace recon::pipeline
