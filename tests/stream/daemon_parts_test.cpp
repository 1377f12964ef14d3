// The daemon's parts in process: channel map, series state machine,
// Prometheus text and the HTTP endpoint.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "pipeline/daemon.hpp"
#include "pipeline/metrics.hpp"

namespace recon::pipeline {
namespace {

stream::StartMessage start(const std::string& id, std::uint64_t images)
{
    stream::StartMessage s;
    s.series_unique_id = id;
    s.number_of_images = images;
    return s;
}

stream::ImageMessage image(const std::string& id, std::uint64_t k)
{
    stream::ImageMessage m;
    m.series_unique_id = id;
    m.image_id = k;
    return m;
}

TEST(ChannelMap, ParsesPairsAndNames)
{
    const auto map = ChannelMap::parse("det0=front, det1 ,det2=side");
    EXPECT_EQ(map.sensor("det0"), "front");
    EXPECT_EQ(map.sensor("det1"), "det1");
    EXPECT_EQ(map.sensor("det2"), "side");
    EXPECT_FALSE(map.sensor("det3").has_value());
    EXPECT_EQ(map.sensors().size(), 3u);
    for (const std::string bad : {"", "=x", "a=", "a,a", "a=b/c"}) {
        try {
            ChannelMap::parse(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string{e.what()}.find("daemon.channels"), std::string::npos);
        }
    }
}

TEST(SeriesTracker, JudgesEveryImageAgainstTheOpenSeries)
{
    SeriesTracker tracker;
    EXPECT_EQ(tracker.image(image("s", 0)), ImageVerdict::before_start);
    EXPECT_FALSE(tracker.start(start("s", 10)).has_value());
    EXPECT_EQ(tracker.image(image("s", 0)), ImageVerdict::accept);
    EXPECT_EQ(tracker.image(image("s", 3)), ImageVerdict::accept);  // 1, 2 skipped
    EXPECT_FALSE(tracker.last_out_of_order());
    EXPECT_EQ(tracker.image(image("s", 1)), ImageVerdict::accept);  // late
    EXPECT_TRUE(tracker.last_out_of_order());
    EXPECT_EQ(tracker.image(image("s", 3)), ImageVerdict::duplicate);
    EXPECT_EQ(tracker.image(image("t", 4)), ImageVerdict::wrong_series);
    EXPECT_EQ(tracker.image(image("s", SeriesTracker::max_image_id)), ImageVerdict::id_out_of_range);
    bool unknown = false;
    EXPECT_FALSE(tracker.end(stream::EndMessage{0, "t"}, &unknown).has_value());
    EXPECT_TRUE(unknown);
    const auto report = tracker.end(stream::EndMessage{0, "s"}, &unknown);
    ASSERT_TRUE(report.has_value());
    EXPECT_FALSE(unknown);
    EXPECT_EQ(report->received, 3);
    EXPECT_EQ(report->duplicates, 1);
    EXPECT_EQ(report->out_of_order, 1);
    EXPECT_EQ(report->missing, 7);  // 10 announced, 3 received
    EXPECT_EQ(report->closed_by, "end");
    EXPECT_FALSE(tracker.open());
}

TEST(SeriesTracker, GapsCountWhenTheSizeIsUnknownAndANewStartClosesTheOld)
{
    SeriesTracker tracker;
    tracker.start(start("a", 0));
    std::mt19937 rng{3};
    std::vector<std::uint64_t> ids;
    for (std::uint64_t k = 0; k < 200; ++k) {
        if (rng() % 5 != 0) ids.push_back(k);  // about one in five missing
    }
    std::shuffle(ids.begin(), ids.end() - 1, rng);  // the last stays last
    for (auto id : ids) EXPECT_EQ(tracker.image(image("a", id)), ImageVerdict::accept);
    const auto report = tracker.start(start("b", 0));
    ASSERT_TRUE(report.has_value());
    EXPECT_EQ(report->closed_by, "new start");
    EXPECT_EQ(report->received, static_cast<std::int64_t>(ids.size()));
    EXPECT_EQ(report->missing, 200 - static_cast<std::int64_t>(ids.size()) - (199 - static_cast<std::int64_t>(ids.back())));
    EXPECT_TRUE(tracker.open());
    EXPECT_EQ(tracker.image(image("a", 1)), ImageVerdict::wrong_series);
    EXPECT_EQ(tracker.close("timeout")->closed_by, "timeout");
}

TEST(Metrics, RendersPrometheusText)
{
    MetricsRegistry registry;
    registry.counter("recon_x_total", "x things", {{"kind", "a\"b"}}).add(3);
    registry.counter("recon_x_total", "x things", {{"kind", "c"}}).add();
    auto& h = registry.histogram("recon_ms", "times", {1, 10});
    for (double v : {0.5, 1.0, 5.0, 50.0}) h.observe(v);
    registry.gauge("recon_up", "up", [] { return 1.0; });
    const std::string text = registry.render();
    EXPECT_NE(text.find("# TYPE recon_x_total counter\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_x_total{kind=\"a\\\"b\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_x_total{kind=\"c\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_ms_bucket{le=\"1\"} 2\n"), std::string::npos) << text;  // le is inclusive
    EXPECT_NE(text.find("recon_ms_bucket{le=\"10\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_ms_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_ms_sum 56.5\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_ms_count 4\n"), std::string::npos) << text;
    EXPECT_NE(text.find("recon_up 1\n"), std::string::npos) << text;
    EXPECT_THROW(registry.histogram("recon_x_total", "clash", {1}), std::logic_error);
}

std::string get(int port, const std::string& request)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    std::string response;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        char buffer[4096];
        ssize_t n;
        while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) response.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return response;
}

TEST(MetricsServer, ServesGetMetricsOnly)
{
    MetricsRegistry registry;
    registry.counter("recon_frames_total", "frames").add(42);
    MetricsServer server{registry, "127.0.0.1", 0};
    ASSERT_GT(server.port(), 0);
    const std::string ok = get(server.port(), "GET /metrics HTTP/1.0\r\n\r\n");
    EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
    EXPECT_NE(ok.find("recon_frames_total 42"), std::string::npos);
    EXPECT_NE(get(server.port(), "GET / HTTP/1.0\r\n\r\n").find("404"), std::string::npos);
    EXPECT_NE(get(server.port(), "POST /metrics HTTP/1.0\r\n\r\n").find("405"), std::string::npos);
    // A client that connects and says nothing does not stall the server.
    const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(get(server.port(), "GET /metrics HTTP/1.0\r\n\r\n").find("200 OK"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds{3});
    ::close(silent);
    EXPECT_THROW((MetricsServer{registry, "not-an-address", 0}), std::runtime_error);
}

}  // namespace
}  // namespace recon::pipeline
