// The real daemon over loopback, driven by a producer socket the test
// controls: good series are reconstructed exactly, every fault is counted
// and survived, SIGTERM finishes cleanly. Every wait is bounded.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <hdf5.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "recon/cgnr.hpp"
#include "recon/system_model.hpp"
#include "sensors/preprocess.hpp"
#include "sensors/recording.hpp"
#include "sensors/simulator.hpp"
#include "stream/bitshuffle.hpp"
#include "stream/cbor_builder.hpp"
#include "stream/codec.hpp"
#include "stream/daemon_harness.hpp"
#include "stream/transport.hpp"
#include "temp_dir.hpp"

namespace recon::stream {
namespace {

using namespace std::chrono_literals;
using testing::CborBuilder;
using testing::ReconProcess;
using recon::test::TempDir;
using Bytes = std::vector<std::uint8_t>;

constexpr int nx = 16, views = 12, bins = 16, m = views * bins;
constexpr int iterations = 5;

/// The daemon's arguments for the tiny geometry, channels c0 -> a, c1 -> b;
/// `extra` holds option/value pairs that replace or add to these.
std::vector<std::string> daemon_args(const std::string& endpoint, const std::filesystem::path& out,
                                     const std::vector<std::string>& extra)
{
    std::vector<std::pair<std::string, std::string>> options{
        {"--connect", endpoint}, {"--channels", "c0=a,c1=b"}, {"--system.nx", std::to_string(nx)},
        {"--system.ny", std::to_string(nx)}, {"--system.views", std::to_string(views)},
        {"--iterations", std::to_string(iterations)}, {"--pipeline.warm_start", "false"},
        {"--device", "cpu"}, {"--threads", "1"}, {"--output", out.string()},
        {"--daemon.log_limit", "1000"}};
    for (std::size_t i = 0; i + 1 < extra.size(); i += 2) {
        auto it = std::find_if(options.begin(), options.end(), [&](const auto& o) { return o.first == extra[i]; });
        if (it != options.end()) it->second = extra[i + 1];
        else options.emplace_back(extra[i], extra[i + 1]);
    }
    std::vector<std::string> args{"daemon"};
    for (const auto& [name, value] : options) {
        args.push_back(name);
        args.push_back(value);
    }
    return args;
}

/// Random counts, dark and flat of one channel (never zeros).
struct ChannelData {
    std::vector<std::uint16_t> counts;
    std::vector<float> dark, flat;
};

ChannelData random_channel(unsigned seed)
{
    std::mt19937 rng{seed};
    std::uniform_real_distribution<float> dark{80, 120}, flat{9000, 11000}, transmission{0.2f, 0.95f};
    ChannelData c;
    for (int i = 0; i < m; ++i) {
        c.dark.push_back(dark(rng));
        c.flat.push_back(flat(rng));
        c.counts.push_back(static_cast<std::uint16_t>(
            std::lround(c.dark.back() + transmission(rng) * (c.flat.back() - c.dark.back()))));
    }
    return c;
}

std::vector<float> random_line_integrals(unsigned seed)
{
    std::mt19937 rng{seed};
    std::uniform_real_distribution<float> p{0.05f, 2.0f};
    std::vector<float> out(m);
    for (auto& v : out) v = p(rng);
    return out;
}

/// A test producer: binds an ephemeral port; send() waits (bounded) for the
/// daemon to connect.
class TestProducer {
public:
    TestProducer() : producer_{"tcp://127.0.0.1:*", {200ms, 1000}} {}
    explicit TestProducer(const std::string& endpoint) : producer_{endpoint, {200ms, 1000}} {}
    const std::string& endpoint() const { return producer_.endpoint(); }

    void send(const Bytes& bytes)
    {
        const auto until = std::chrono::steady_clock::now() + 15s;
        while (std::chrono::steady_clock::now() < until) {
            if (producer_.send(bytes)) return;
        }
        FAIL() << "daemon did not connect within 15 s";
    }
    void send(const Message& message, Compression compression = Compression::bslz4)
    {
        send(encode_message(message, {compression, 0}));
    }

private:
    Producer producer_;
};

StartMessage start_message(const std::string& id, const std::map<std::string, ChannelData>& data,
                           std::uint64_t images)
{
    StartMessage start;
    start.series_id = 1;
    start.series_unique_id = id;
    start.channels = {"c0", "c1"};
    start.number_of_images = images;
    start.image_dtype = "uint16";
    for (const auto& [channel, c] : data) {
        start.flatfield[channel] = MultiDimArray::from_f32({views, bins}, c.flat);
        start.darkfield[channel] = MultiDimArray::from_f32({views, bins}, c.dark);
    }
    return start;
}

/// Image k: c0 raw counts (u16), c1 line integrals (f32).
ImageMessage image_message(const std::string& id, std::uint64_t k, const ChannelData& c0,
                           const std::vector<float>& c1)
{
    ImageMessage image;
    image.series_id = 1;
    image.series_unique_id = id;
    image.image_id = k;
    image.publish_time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    image.data["c0"] = MultiDimArray::from_u16({views, bins}, c0.counts);
    image.data["c1"] = MultiDimArray::from_f32({views, bins}, c1);
    return image;
}

nlohmann::json summary_of(const std::filesystem::path& out)
{
    const std::string text = testing::read_text(out / "summary.json");
    if (text.empty()) {
        ADD_FAILURE() << "no summary.json";
        return nlohmann::json::object();
    }
    return nlohmann::json::parse(text);
}

std::int64_t event(const nlohmann::json& summary, const std::string& kind)
{
    const auto& events = summary["stream"]["events"];
    return events.contains(kind) ? events[kind].get<std::int64_t>() : 0;
}

/// Rows of /entry/reconstruction/<sensor>/data and their frame ids.
struct OutputImages {
    std::vector<std::int64_t> frame_ids;
    std::vector<float> data;  // [rows][nx*nx]
};

OutputImages read_output(const std::filesystem::path& file, const std::string& sensor, bool no_locking = false)
{
    OutputImages out;
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (no_locking) H5Pset_file_locking(fapl, false, true);
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) return out;
    const std::string group = "/entry/reconstruction/" + sensor;
    const hid_t data = H5Dopen2(f, (group + "/data").c_str(), H5P_DEFAULT);
    const hid_t ids = H5Dopen2(f, (group + "/timing/frame_id").c_str(), H5P_DEFAULT);
    if (data >= 0 && ids >= 0) {
        const hid_t space = H5Dget_space(data);
        hsize_t dims[3] = {0, 0, 0};
        H5Sget_simple_extent_dims(space, dims, nullptr);
        H5Sclose(space);
        out.data.resize(dims[0] * dims[1] * dims[2]);
        if (!out.data.empty()) H5Dread(data, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data());
        const hid_t id_space = H5Dget_space(ids);
        hsize_t n = 0;
        H5Sget_simple_extent_dims(id_space, &n, nullptr);
        H5Sclose(id_space);
        out.frame_ids.resize(n);
        if (n) H5Dread(ids, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.frame_ids.data());
    }
    if (data >= 0) H5Dclose(data);
    if (ids >= 0) H5Dclose(ids);
    H5Fclose(f);
    return out;
}

/// The reference: the same CGNR on the same line integrals, in process.
std::vector<float> reference_image(const std::vector<float>& b)
{
    SystemSpec spec;
    spec.geometry = "parallel2d";
    spec.nx = spec.ny = nx;
    spec.views = views;
    const auto model = make_system_model(spec);
    SolverOptions options;
    options.max_iterations = iterations;
    return solve_cgnr(*model, Regularizer{}, options, Executor::cpu(), b);
}

double relative_difference(const float* a, const std::vector<float>& b)
{
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        diff += (a[i] - b[i]) * double(a[i] - b[i]);
        norm += b[i] * double(b[i]);
    }
    return std::sqrt(diff / norm);
}

int count_lines_with(const std::string& text, const std::string& needle)
{
    int n = 0;
    std::stringstream lines{text};
    std::string line;
    while (std::getline(lines, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
}

/// A free loopback endpoint: bound, read, released.
std::string free_endpoint()
{
    Producer probe{"tcp://127.0.0.1:*"};
    return probe.endpoint();
}

TEST(Daemon, GoodSeriesIsReconstructedExactlyAndPublished)
{
    TempDir dir;
    TestProducer producer;
    const std::string pub = free_endpoint();
    ReconProcess daemon{daemon_args(producer.endpoint(), dir.path() / "out", {"--max-series", "1", "--publish", pub}),
                        dir.path()};
    ASSERT_TRUE(daemon.started());
    zmq::context_t context;
    zmq::socket_t sub{context, zmq::socket_type::sub};
    sub.set(zmq::sockopt::subscribe, "");
    sub.set(zmq::sockopt::rcvtimeo, 5000);
    sub.connect(pub);
    const std::map<std::string, ChannelData> calib{{"c0", random_channel(1)}};
    const int images = 6;
    producer.send(start_message("good", calib, images));
    ASSERT_TRUE(daemon.wait_for_err("started", 10s));
    std::this_thread::sleep_for(300ms);  // the subscription reaches the PUB socket
    std::vector<ChannelData> c0;
    std::vector<std::vector<float>> c1;
    for (int k = 0; k < images; ++k) {
        ChannelData c = random_channel(100 + k);
        c.dark = calib.at("c0").dark;
        c.flat = calib.at("c0").flat;
        // Counts consistent with the series' dark and flat.
        std::mt19937 rng{static_cast<unsigned>(k)};
        std::uniform_real_distribution<float> t{0.2f, 0.95f};
        for (int i = 0; i < m; ++i) {
            c.counts[i] = static_cast<std::uint16_t>(std::lround(c.dark[i] + t(rng) * (c.flat[i] - c.dark[i])));
        }
        c0.push_back(c);
        c1.push_back(random_line_integrals(200 + k));
        producer.send(image_message("good", k, c, c1.back()), k % 2 ? Compression::lz4 : Compression::bslz4);
    }
    producer.send(EndMessage{1, "good"});
    const auto status = daemon.wait(60s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 0) << daemon.err();

    const auto summary = summary_of(dir.path() / "out");
    EXPECT_EQ(summary["count"], 2 * images);
    EXPECT_EQ(summary["dropped"], 0);
    EXPECT_EQ(summary["stream"]["stopped_by"], "max_series");
    const auto a = read_output(dir.path() / "out" / "reconstruction.h5", "a");
    const auto b = read_output(dir.path() / "out" / "reconstruction.h5", "b");
    ASSERT_EQ(a.frame_ids.size(), static_cast<std::size_t>(images));
    ASSERT_EQ(b.frame_ids.size(), static_cast<std::size_t>(images));
    for (std::size_t row = 0; row < a.frame_ids.size(); ++row) {
        const auto k = static_cast<std::size_t>(a.frame_ids[row]);
        ASSERT_LT(k, c0.size());
        std::vector<float> counts(c0[k].counts.begin(), c0[k].counts.end());
        const auto want = reference_image(sensors::counts_to_line_integrals(counts, c0[k].dark, c0[k].flat));
        EXPECT_LT(relative_difference(a.data.data() + row * nx * nx, want), 1e-4) << "a frame " << k;
    }
    for (std::size_t row = 0; row < b.frame_ids.size(); ++row) {
        const auto k = static_cast<std::size_t>(b.frame_ids[row]);
        ASSERT_LT(k, c1.size());
        EXPECT_LT(relative_difference(b.data.data() + row * nx * nx, reference_image(c1[k])), 1e-4)
            << "b frame " << k;
    }
    EXPECT_EQ(count_lines_with(testing::read_text(dir.path() / "out" / "frames.jsonl"), "\"frame_id\""),
              2 * images);

    // Every image also went out on the PUB socket: topic, Stream V2 image,
    // JSON latency record; the image equals the written one.
    for (int n = 0; n < 2 * images; ++n) {
        std::vector<zmq::message_t> parts;
        ASSERT_TRUE(zmq::recv_multipart(sub, std::back_inserter(parts)).has_value()) << "published image " << n;
        ASSERT_EQ(parts.size(), 3u);
        const std::string sensor = parts[0].to_string();
        ASSERT_TRUE(sensor == "a" || sensor == "b") << sensor;
        const auto image = std::get<ImageMessage>(decode_message(
            std::span<const std::uint8_t>{parts[1].data<std::uint8_t>(), parts[1].size()}));
        const auto& array = image.data.at(sensor);
        EXPECT_EQ(array.shape, (std::vector<std::uint64_t>{nx, nx}));
        const auto record = nlohmann::json::parse(parts[2].to_string());
        EXPECT_EQ(record["frame_id"].get<std::uint64_t>(), image.image_id);
        EXPECT_GT(record["end_to_end_ms"].get<double>(), 0.0);
        const auto& written = sensor == "a" ? a : b;
        const auto row = std::find(written.frame_ids.begin(), written.frame_ids.end(),
                                   static_cast<std::int64_t>(image.image_id)) - written.frame_ids.begin();
        ASSERT_LT(row, static_cast<std::ptrdiff_t>(written.frame_ids.size()));
        const auto values = array.to_float();
        EXPECT_TRUE(std::equal(values.begin(), values.end(), written.data.begin() + row * nx * nx));
    }
}

TEST(Daemon, EveryBadMessageIsCountedLoggedAndSurvived)
{
    TempDir dir;
    TestProducer producer;
    ReconProcess daemon{daemon_args(producer.endpoint(), dir.path() / "out", {"--max-series", "1",
                                    "--daemon.max_array_mb", "1"}),
                        dir.path()};
    ASSERT_TRUE(daemon.started());
    const ChannelData calib = random_channel(7);
    const auto c1 = random_line_integrals(8);
    int good = 0;  // images with both channels good
    // Before start.
    producer.send(image_message("s", 0, calib, c1));
    producer.send(start_message("s", {{"c0", calib}}, 0));
    // Interleave good images with one bad message of every kind.
    auto good_image = [&](std::uint64_t k) {
        producer.send(image_message("s", k, calib, c1));
        ++good;
    };
    const Bytes valid = encode_message(image_message("s", 99, calib, c1), {Compression::bslz4, 0});
    good_image(0);
    std::mt19937 rng{5};
    Bytes garbage{0xd9, 0xd9, 0xf7, 0xbc};  // a reserved item head, then noise
    for (int i = 0; i < 300; ++i) garbage.push_back(static_cast<std::uint8_t>(rng()));
    producer.send(garbage);                                                        // malformed
    producer.send(Bytes(valid.begin(), valid.begin() + valid.size() / 2));         // truncated
    good_image(1);
    CborBuilder untagged;
    untagged.map(1).text("type").text("end");
    producer.send(untagged.data());                                                // missing self-describe
    CborBuilder unknown;
    unknown.self_describe().map(1).text("type").text("calibration");
    producer.send(unknown.data());                                                 // unknown type
    CborBuilder u64;
    u64.self_describe().map(4).text("type").text("image").text("series_unique_id").text("s")
        .text("image_id").uint(50).text("data").map(1).text("c0").md_array({views, bins}, 71, Bytes(m * 8, 1));
    producer.send(u64.data());                                                     // unsupported dtype
    good_image(2);
    Bytes block = compress_lz4(Bytes(m * 2, 3));
    block[block.size() / 2] ^= 0x5a;
    block.resize(block.size() - 2);
    CborBuilder corrupt;
    corrupt.self_describe().map(4).text("type").text("image").text("series_unique_id").text("s")
        .text("image_id").uint(51).text("data").map(1).text("c0").tag(40).array(2).array(2).uint(views)
        .uint(bins).tag(69).tag(56500).array(3).text("lz4").uint(0).bytes(block);
    producer.send(corrupt.data());                                                 // corrupt LZ4
    CborBuilder bomb;
    bomb.self_describe().map(4).text("type").text("image").text("series_unique_id").text("s")
        .text("image_id").uint(52).text("data").map(1).text("c0").tag(40).array(2).array(2).uint(100000)
        .uint(100000).tag(69).tag(56500).array(3).text("bslz4").uint(2).bytes(compress_bslz4(Bytes(64, 0), 2));
    producer.send(bomb.data());                                                    // decompression bomb
    good_image(3);
    ImageMessage wrong_shape = image_message("s", 4, calib, c1);
    wrong_shape.data["c0"] = MultiDimArray::from_u16({views + 1, bins}, std::vector<std::uint16_t>((views + 1) * bins, 500));
    producer.send(wrong_shape);                                                    // shape mismatch (c0 only)
    producer.send(image_message("s", 3, calib, c1));                               // duplicate id
    good_image(7);                                                                 // gap: 5, 6 missing
    good_image(6);                                                                 // out of order
    producer.send(EndMessage{1, "s"});
    const auto status = daemon.wait(60s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_EQ(status.code, 0) << daemon.err();

    const auto summary = summary_of(dir.path() / "out");
    // Every good frame written: both channels of the good images, plus
    // channel c1 of the image whose c0 had the wrong shape.
    EXPECT_EQ(summary["count"], 2 * good + 1) << summary.dump();
    EXPECT_EQ(summary["dropped"], 0);
    EXPECT_EQ(event(summary, "image_before_start"), 1);
    EXPECT_EQ(event(summary, "malformed_cbor"), 1) << summary.dump();
    EXPECT_EQ(event(summary, "truncated"), 1) << summary.dump();
    EXPECT_EQ(event(summary, "missing_self_describe"), 1);
    EXPECT_EQ(event(summary, "unknown_message_type"), 1);
    EXPECT_EQ(event(summary, "unsupported_dtype"), 1);
    EXPECT_EQ(event(summary, "corrupt_data"), 1);
    EXPECT_EQ(event(summary, "size_limit"), 1);
    EXPECT_EQ(event(summary, "shape_mismatch"), 1);
    EXPECT_EQ(event(summary, "duplicate_image_id"), 1);
    EXPECT_EQ(event(summary, "out_of_order"), 1);
    EXPECT_EQ(event(summary, "missing_images"), 1);  // id 5
    // One log line per bad message.
    const std::string err = daemon.err();
    EXPECT_EQ(count_lines_with(err, "bad message #"), 7) << err;
    EXPECT_EQ(count_lines_with(err, "rejected: image_before_start"), 1) << err;
    EXPECT_EQ(count_lines_with(err, "rejected: duplicate_image_id"), 1) << err;
}

TEST(Daemon, MissingEndClosesTheSeriesAfterTheTimeout)
{
    TempDir dir;
    TestProducer producer;
    ReconProcess daemon{daemon_args(producer.endpoint(), dir.path() / "out",
                                    {"--max-series", "1", "--series-timeout", "0.7"}),
                        dir.path()};
    const ChannelData calib = random_channel(3);
    producer.send(start_message("open", {{"c0", calib}}, 5));
    for (int k = 0; k < 3; ++k) producer.send(image_message("open", k, calib, random_line_integrals(k)));
    const auto status = daemon.wait(30s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    const auto summary = summary_of(dir.path() / "out");
    EXPECT_EQ(summary["count"], 6);
    EXPECT_EQ(event(summary, "series_timeout"), 1);
    EXPECT_EQ(event(summary, "missing_images"), 2);  // 5 announced, 3 sent
}

TEST(Daemon, SurvivesAProducerRestartMidSeries)
{
    TempDir dir;
    std::string endpoint;
    std::optional<TestProducer> first{std::in_place};
    endpoint = first->endpoint();
    ReconProcess daemon{daemon_args(endpoint, dir.path() / "out", {"--max-series", "2"}), dir.path()};
    const ChannelData calib = random_channel(4);
    first->send(start_message("before", {{"c0", calib}}, 10));
    for (int k = 0; k < 3; ++k) first->send(image_message("before", k, calib, random_line_integrals(k)));
    std::this_thread::sleep_for(300ms);  // let them arrive before the socket goes
    first.reset();                        // the producer dies mid-series
    TestProducer second{endpoint};        // and comes back on the same port
    second.send(start_message("after", {{"c0", calib}}, 4));
    second.send(image_message("before", 3, calib, random_line_integrals(3)));  // stale series
    for (int k = 0; k < 4; ++k) second.send(image_message("after", k, calib, random_line_integrals(10 + k)));
    second.send(EndMessage{1, "after"});
    const auto status = daemon.wait(60s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    const auto summary = summary_of(dir.path() / "out");
    EXPECT_EQ(summary["count"], 2 * (3 + 4)) << summary.dump();
    EXPECT_EQ(event(summary, "series_unterminated"), 1);
    EXPECT_EQ(event(summary, "image_of_another_series"), 1) << summary.dump();
}

TEST(Daemon, FramesFasterThanTheSolverAreDroppedWithBoundedMemory)
{
    // One passive solver thread: a loaded CI machine must not turn idle
    // OpenMP spinning into minutes of run time.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    TempDir dir;
    TestProducer producer;
    ReconProcess daemon{daemon_args(producer.endpoint(), dir.path() / "out",
                                    {"--max-series", "1", "--iterations", "100", "--system.nx", "32",
                                     "--system.ny", "32", "--system.views", "32", "--system.bins", "32",
                                     "--pipeline.queue_capacity", "2"}),
                        dir.path()};
    const int big_m = 32 * 32;
    std::vector<float> p(big_m, 0.5f);
    StartMessage start;
    start.series_unique_id = "flood";
    producer.send(start);
    const int images = 100;
    for (int k = 0; k < images; ++k) {
        ImageMessage image;
        image.series_unique_id = "flood";
        image.image_id = static_cast<std::uint64_t>(k);
        p[static_cast<std::size_t>(k % big_m)] += 0.1f;
        image.data["c0"] = MultiDimArray::from_f32({32, 32}, p);
        producer.send(image);
    }
    producer.send(EndMessage{0, "flood"});
    const auto status = daemon.wait(120s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    const auto summary = summary_of(dir.path() / "out");
    const auto count = summary["count"].get<std::int64_t>();
    const auto dropped = summary["dropped"].get<std::int64_t>();
    EXPECT_GT(dropped, 0) << summary.dump();
    EXPECT_EQ(count + dropped, images) << summary.dump();
    EXPECT_EQ(event(summary, "dropped"), dropped);
    EXPECT_LT(status.max_rss_kb, 400 * 1024) << "peak resident memory";
}

int http_get_port(const std::string& err)
{
    std::smatch match;
    if (std::regex_search(err, match, std::regex{"metrics: http://127\\.0\\.0\\.1:([0-9]+)/metrics"})) {
        return std::stoi(match[1]);
    }
    return -1;
}

std::string http_get(int port, const std::string& path)
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
        const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        char buffer[4096];
        ssize_t n;
        while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) response.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return response;
}

TEST(Daemon, SigtermMidSeriesFinishesAndServesMetricsAndReadableOutput)
{
    TempDir dir;
    TestProducer producer;
    ReconProcess daemon{daemon_args(producer.endpoint(), dir.path() / "out", {"--metrics-port", "0"}), dir.path()};
    ASSERT_TRUE(daemon.wait_for_err("metrics: http://", 20s)) << daemon.err();
    const int port = http_get_port(daemon.err());
    ASSERT_GT(port, 0);
    const ChannelData calib = random_channel(9);
    producer.send(start_message("live", {{"c0", calib}}, 100));
    for (int k = 0; k < 4; ++k) producer.send(image_message("live", k, calib, random_line_integrals(k)));
    CborBuilder unknown;
    unknown.self_describe().map(1).text("type").text("mystery");
    producer.send(unknown.data());
    // Wait until the frames are written: the JSONL report has 8 records.
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until &&
           count_lines_with(testing::read_text(dir.path() / "out" / "frames.jsonl"), "frame_id") < 8) {
        std::this_thread::sleep_for(20ms);
    }
    // The output file is readable while the daemon runs (flushed per frame).
    const auto live = read_output(dir.path() / "out" / "reconstruction.h5", "a", /*no_locking=*/true);
    EXPECT_EQ(live.frame_ids.size(), 4u);
    const std::string metrics = http_get(port, "/metrics");
    EXPECT_NE(metrics.find("HTTP/1.0 200 OK"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("recon_frames_total{sensor=\"a\"} 4"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("recon_frames_total{sensor=\"b\"} 4"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("recon_stage_latency_ms_bucket{stage=\"solve\",le=\"+Inf\"} 8"), std::string::npos);
    EXPECT_NE(metrics.find("recon_end_to_end_latency_ms_count 8"), std::string::npos);
    EXPECT_NE(metrics.find("recon_stream_bad_messages_total{kind=\"unknown_message_type\"} 1"), std::string::npos);
    EXPECT_NE(http_get(port, "/other").find("404"), std::string::npos);
    // Two more images in flight, then SIGTERM mid-series.
    for (int k = 4; k < 6; ++k) producer.send(image_message("live", k, calib, random_line_integrals(k)));
    std::this_thread::sleep_for(100ms);
    daemon.signal(SIGTERM);
    const auto status = daemon.wait(30s);
    ASSERT_FALSE(status.timed_out) << daemon.err();
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 0) << daemon.err();
    const auto summary = summary_of(dir.path() / "out");
    EXPECT_EQ(summary["stream"]["stopped_by"], "signal");
    const auto count = summary["count"].get<std::int64_t>();
    EXPECT_EQ(count + summary["dropped"].get<std::int64_t>(), summary["stream"]["frames_submitted"].get<std::int64_t>());
    EXPECT_EQ(count, 12) << daemon.err();
    const auto closed = read_output(dir.path() / "out" / "reconstruction.h5", "a");
    EXPECT_EQ(closed.frame_ids.size(), 6u);
}

TEST(Daemon, BadOptionsAreOneLineErrors)
{
    TempDir dir;
    ReconProcess daemon{{"daemon", "--channels", "=x", "--output", (dir.path() / "out").string()}, dir.path()};
    const auto status = daemon.wait(20s);
    EXPECT_EQ(status.code, 1);
    EXPECT_NE(daemon.err().find("daemon.channels"), std::string::npos) << daemon.err();
    EXPECT_EQ(count_lines_with(daemon.err(), "error"), 1);
    ReconProcess serve{{"simulate", "--serve", "tcp://127.0.0.1:*", "--rate", "0"}, dir.path()};
    const auto serve_status = serve.wait(20s);
    EXPECT_EQ(serve_status.code, 1);
    EXPECT_NE(serve.err().find("serve.rate_hz"), std::string::npos) << serve.err();
}

TEST(Serve, StreamsAPhantomTheDaemonReconstructs)
{
    TempDir dir;
    // A free port: bind, read, release (the producer binds it right after).
    std::string endpoint;
    {
        Producer probe{"tcp://127.0.0.1:*"};
        endpoint = probe.endpoint();
    }
    ReconProcess serve{{"simulate", "--serve", endpoint, "--rate", "50", "--frames", "8", "--sensors", "2",
                        "--system.nx", "16", "--system.ny", "16", "--system.views", "12",
                        "--simulate.dtype", "uint16", "--simulate.noise", "poisson", "--compression", "bslz4"},
                       dir.path()};
    TempDir daemon_dir;
    ReconProcess daemon{{"daemon", "--connect", endpoint, "--channels", "sensor0,sensor1", "--system.nx", "16",
                         "--system.ny", "16", "--system.views", "12", "--iterations", "5", "--device", "cpu",
                         "--max-series", "1", "--pipeline.drop_policy", "block", "--output",
                         (daemon_dir.path() / "out").string()},
                        daemon_dir.path()};
    const auto served = serve.wait(60s);
    const auto status = daemon.wait(60s);
    ASSERT_FALSE(served.timed_out || status.timed_out) << serve.err() << daemon.err();
    EXPECT_EQ(served.code, 0) << serve.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    const auto summary = summary_of(daemon_dir.path() / "out");
    EXPECT_EQ(summary["count"], 16) << daemon.err();
    EXPECT_TRUE(summary.contains("end_to_end_ms"));
    const auto images = read_output(daemon_dir.path() / "out" / "reconstruction.h5", "sensor1");
    ASSERT_EQ(images.frame_ids.size(), 8u);
    double energy = 0;
    for (float v : images.data) {
        EXPECT_TRUE(std::isfinite(v));
        energy += v * double(v);
    }
    EXPECT_GT(energy, 0.0);
}


TEST(Serve, SigtermEndsTheSeriesAndExitsZero)
{
    TempDir dir;
    const std::string endpoint = free_endpoint();
    ReconProcess serve{{"simulate", "--serve", endpoint, "--rate", "20", "--frames", "100000", "--system.nx", "16",
                        "--system.ny", "16", "--system.views", "12", "--compression", "lz4"},
                       dir.path()};
    TempDir daemon_dir;
    ReconProcess daemon{{"daemon", "--connect", endpoint, "--channels", "sensor0", "--system.nx", "16",
                         "--system.ny", "16", "--system.views", "12", "--iterations", "3", "--device", "cpu",
                         "--max-series", "1", "--output", (daemon_dir.path() / "out").string()},
                        daemon_dir.path()};
    ASSERT_TRUE(daemon.wait_for_err("started", 20s)) << daemon.err() << serve.err();
    std::this_thread::sleep_for(300ms);
    serve.signal(SIGTERM);
    const auto served = serve.wait(20s);
    const auto status = daemon.wait(20s);
    ASSERT_FALSE(served.timed_out || status.timed_out) << serve.err() << daemon.err();
    EXPECT_EQ(served.code, 0) << serve.err();
    EXPECT_NE(serve.err().find("stopped by signal"), std::string::npos) << serve.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    EXPECT_NE(daemon.err().find("closed by end"), std::string::npos) << daemon.err();
    const auto summary = summary_of(daemon_dir.path() / "out");
    EXPECT_GT(summary["count"].get<std::int64_t>(), 0);
    EXPECT_LT(summary["count"].get<std::int64_t>(), 100000);
}


TEST(Serve, PlaysARecordingTheDaemonReconstructsExactly)
{
    TempDir dir;
    const auto recording = (dir.path() / "rec.h5").string();
    sensors::SimulatedSensor sensor;
    sensor.system.geometry = "parallel2d";
    sensor.system.nx = sensor.system.ny = nx;
    sensor.system.views = views;
    sensor.noise.kind = sensors::NoiseKind::gaussian;
    sensor.noise.sigma = 0.02;
    sensors::simulate_recording(recording, sensors::SimulationConfig::uniform(2, sensor, 4, 10.0, 17));
    const std::string endpoint = free_endpoint();
    ReconProcess serve{{"simulate", "--serve", endpoint, "--recording", recording, "--rate", "100",
                        "--compression", "lz4"},
                       dir.path()};
    TempDir daemon_dir;
    ReconProcess daemon{daemon_args(endpoint, daemon_dir.path() / "out",
                                    {"--channels", "sensor0,sensor1", "--max-series", "1",
                                     "--pipeline.drop_policy", "block"}),
                        daemon_dir.path()};
    const auto served = serve.wait(60s);
    const auto status = daemon.wait(60s);
    ASSERT_FALSE(served.timed_out || status.timed_out) << serve.err() << daemon.err();
    EXPECT_EQ(served.code, 0) << serve.err();
    EXPECT_EQ(status.code, 0) << daemon.err();
    const sensors::RecordingReader reader{recording};
    for (const std::string name : {"sensor0", "sensor1"}) {
        const auto images = read_output(daemon_dir.path() / "out" / "reconstruction.h5", name);
        ASSERT_EQ(images.frame_ids.size(), 4u) << name;
        for (std::size_t row = 0; row < images.frame_ids.size(); ++row) {
            const auto frame = reader.read_frame(name, images.frame_ids[row]);
            EXPECT_LT(relative_difference(images.data.data() + row * nx * nx, reference_image(frame.data)), 1e-4)
                << name << " frame " << images.frame_ids[row];
        }
    }
}

TEST(Daemon, DevicesNeedACudaBuild)
{
    if (kernels::cuda_compiled()) GTEST_SKIP() << "CUDA build: --devices is valid here";
    TempDir dir;
    ReconProcess daemon{{"daemon", "--devices", "0,1", "--output", (dir.path() / "out").string()}, dir.path()};
    const auto status = daemon.wait(20s);
    EXPECT_EQ(status.code, 1);
    EXPECT_NE(daemon.err().find("daemon.devices"), std::string::npos) << daemon.err();
}

}  // namespace
}  // namespace recon::stream
