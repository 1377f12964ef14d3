// The `recon` binary end to end: simulate a tiny recording, replay it, and
// check the output file, the reports and the exit codes; then every kind of
// bad input: a one-line error naming what was wrong, a non-zero exit, no
// crash and no hang.

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/executor.hpp"
#include "recon/hdf5.hpp"
#include "temp_dir.hpp"

namespace recon::pipeline {
namespace {

namespace fs = std::filesystem;

struct RunResult {
    int exit_code = -1;
    std::string out, err;
    double seconds = 0;
};

std::string read_text(const fs::path& path)
{
    std::ifstream in{path};
    return {std::istreambuf_iterator<char>{in}, {}};
}

std::vector<std::string> lines_of(const std::string& text)
{
    std::vector<std::string> lines;
    std::istringstream in{text};
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) lines.push_back(line);
    }
    return lines;
}

class CliTest : public ::testing::Test {
protected:
    // The recording is made once per process, in SetUp rather than
    // SetUpTestSuite: a failure there fails the test instead of skipping it.
    void SetUp() override
    {
        if (!recording_.empty()) return;
        const char* binary = std::getenv("RECON_BINARY");
        ASSERT_NE(binary, nullptr) << "RECON_BINARY is not set";
        ASSERT_TRUE(fs::exists(binary)) << binary;
        binary_ = binary;
        scratch_ = std::make_unique<test::TempDir>();
        // A small but real recording: 2 sensors x 3 frames of a 32 x 32
        // Shepp-Logan through parallel2d, 24 views, ground truth included.
        seed_ = std::random_device{}() % 100000 + 1;
        const auto path = scratch_->file("tiny.h5");
        const RunResult r = run({"simulate", "--output", path, "--geometry", "parallel2d",
                                 "--system.nx", "32", "--system.ny", "32", "--system.views", "24",
                                 "--sensors", "2", "--frames", "3", "--simulate.rate_hz", "20",
                                 "--simulate.seed", std::to_string(seed_)});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        recording_ = path;
    }
    static void TearDownTestSuite()
    {
        scratch_.reset();
        recording_.clear();  // a repeated run (--gtest_repeat) records again
    }

    /// Runs the binary with a time limit (a hang fails the test, not CI).
    static RunResult run(const std::vector<std::string>& args)
    {
        static int counter = 0;
        const auto out = dir() / ("out" + std::to_string(counter) + ".txt");
        const auto err = dir() / ("err" + std::to_string(counter++) + ".txt");
        std::string command = "timeout 120 '" + binary_ + "'";
        for (const auto& a : args) command += " '" + a + "'";
        command += " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
        const auto start = std::chrono::steady_clock::now();
        const int status = std::system(command.c_str());
        RunResult r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.out = read_text(out);
        r.err = read_text(err);
        return r;
    }

    /// A failing run: exit code 1 (an error, not a crash, a hang or an
    /// abort), and exactly one error line that names every one of `words`.
    static void expect_error(const std::vector<std::string>& args,
                             const std::vector<std::string>& words)
    {
        const RunResult r = run(args);
        std::string joined;
        for (const auto& a : args) joined += a + " ";
        SCOPED_TRACE("recon " + joined);
        EXPECT_EQ(r.exit_code, 1) << r.err;
        std::vector<std::string> errors;
        for (const auto& line : lines_of(r.err)) {
            if (line.find("error:") != std::string::npos) errors.push_back(line);
        }
        ASSERT_EQ(errors.size(), 1U) << r.err;
        for (const auto& w : words) EXPECT_NE(errors[0].find(w), std::string::npos) << errors[0];
    }

    static std::string binary_;
    /// The suite's scratch directory, shared by its tests like the recording.
    static const fs::path& dir() { return scratch_->path(); }

    static std::unique_ptr<test::TempDir> scratch_;
    static std::string recording_;
    static unsigned seed_;
};

std::string CliTest::binary_;
std::unique_ptr<test::TempDir> CliTest::scratch_;
std::string CliTest::recording_;
unsigned CliTest::seed_ = 0;

TEST_F(CliTest, ReplayWritesTheOutputFileReportsAndPlot)
{
    const auto out = dir() / "replay-out";
    const RunResult r = run({"replay", recording_, "--output", out.string(), "--device", "cpu",
                       "--iterations", "30", "--regularizer", "nonneg:10"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("total"), std::string::npos) << r.out;  // the summary table

    // HDF5 output: images and one timing row per frame, for each sensor.
    const auto file = hdf5::File::open((out / "reconstruction.h5").string());
    for (const std::string sensor : {"sensor0", "sensor1"}) {
        const std::string base = "/entry/reconstruction/" + sensor;
        const auto data = file.open_dataset(base + "/data");
        EXPECT_EQ(data.shape(), (hdf5::Shape{3, 32, 32}));
        EXPECT_EQ(data.chunk_shape(), (hdf5::Shape{1, 32, 32}));
        const auto images = data.read<float>();
        for (const float v : images) ASSERT_TRUE(std::isfinite(v));
        for (const std::string column :
             {"frame_id", "t_arrival_ns", "queue_ms", "upload_ms", "solve_ms", "download_ms",
              "write_ms", "total_ms", "iterations", "rel_gradient", "deadline_missed"}) {
            EXPECT_EQ(file.open_dataset(base + "/timing/" + column).shape(), (hdf5::Shape{3}))
                << column;
        }
        auto ids = file.open_dataset(base + "/timing/frame_id").read<std::int64_t>();
        std::sort(ids.begin(), ids.end());
        EXPECT_EQ(ids, (std::vector<std::int64_t>{0, 1, 2}));
        for (const int it : file.open_dataset(base + "/timing/iterations").read<int>()) {
            EXPECT_EQ(it, 30);
        }
        const auto timing = file.open_group(base + "/timing");
        EXPECT_GT(timing.read_scalar_attribute<double>("budget_ms"), 0.0);
        EXPECT_EQ(timing.read_string_attribute("device"), "cpu");
        // The phantom is recovered: PSNR well above that of a blank image.
        for (const double psnr : file.open_dataset(base + "/quality/psnr_db").read<double>()) {
            EXPECT_GT(psnr, 15.0);
        }
    }
    const auto config = file.open_dataset("/entry/reconstruction/parameters/config").read_string();
    EXPECT_NE(config.find("[solver]"), std::string::npos);
    EXPECT_NE(config.find("iterations = 30"), std::string::npos);
    EXPECT_FALSE(file.open_dataset("/entry/reconstruction/parameters/version").read_string().empty());

    // JSON Lines: one record per frame with the stage times and quality.
    const auto records = lines_of(read_text(out / "frames.jsonl"));
    ASSERT_EQ(records.size(), 6U);
    for (const auto& line : records) {
        const auto j = nlohmann::json::parse(line);
        for (const char* key : {"sensor", "frame_id", "queue_ms", "upload_ms", "solve_ms",
                                "download_ms", "write_ms", "total_ms", "iterations",
                                "rel_gradient", "status", "budget_ms", "missed", "psnr_db",
                                "ssim"}) {
            EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
        }
        EXPECT_GT(j["solve_ms"].get<double>(), 0.0);
    }
    const auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
    EXPECT_EQ(summary["count"], 6);
    EXPECT_EQ(summary["dropped"], 0);
    EXPECT_TRUE(summary.contains("psnr_db"));
    EXPECT_EQ(read_text(out / "latency.svg").rfind("<svg", 0), 0U);
}

TEST_F(CliTest, RecordedTimingFollowsTheTimestamps)
{
    // 3 frames per sensor at 20 Hz: the last frame arrives 100 ms after the first.
    const auto out = dir() / "recorded";
    const RunResult r = run({"replay", recording_, "--output", out.string(), "--device", "cpu",
                       "--iterations", "5", "--timing", "recorded"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto records = lines_of(read_text(out / "frames.jsonl"));
    ASSERT_EQ(records.size(), 6U);
    std::int64_t first = INT64_MAX, last = 0;
    for (const auto& line : records) {
        const auto t = nlohmann::json::parse(line)["t_arrival_ns"].get<std::int64_t>();
        first = std::min(first, t);
        last = std::max(last, t);
    }
    EXPECT_GE(last - first, 95'000'000);
}

TEST_F(CliTest, SyntheticSystemWithoutImageGridHasPsnrOnly)
{
    // A synthetic matrix system: the image is 1 x n, so SSIM (7 x 7 windows)
    // is left out while PSNR is reported.
    const auto recording = scratch_->file("synthetic.h5");
    RunResult r = run({"simulate", "--output", recording, "--geometry", "synthetic",
                       "--system.rows", "900", "--system.cols", "150", "--system.nnz", "6000",
                       "--frames", "2", "--simulate.phantom", "random_ellipses"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = dir() / "synthetic-out";
    r = run({"replay", recording, "--output", out.string(), "--device", "cpu", "--iterations",
             "40", "--system.materialize", "true"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto file = hdf5::File::open((out / "reconstruction.h5").string());
    EXPECT_EQ(file.open_dataset("/entry/reconstruction/sensor0/data").shape(),
              (hdf5::Shape{2, 1, 150}));
    EXPECT_TRUE(file.has_dataset("/entry/reconstruction/sensor0/quality/psnr_db"));
    EXPECT_FALSE(file.has_dataset("/entry/reconstruction/sensor0/quality/ssim"));
    for (const auto& line : lines_of(read_text(out / "frames.jsonl"))) {
        const auto j = nlohmann::json::parse(line);
        EXPECT_TRUE(j.contains("psnr_db"));
        EXPECT_FALSE(j.contains("ssim"));
    }
}

TEST_F(CliTest, ShippedConfigsParse)
{
    // Every scenario file loads for both commands: the only error left is
    // the missing recording.
    const char* from_environment = std::getenv("RECON_SOURCE_DIR");
    const std::string source = from_environment != nullptr ? from_environment : RECON_TEST_SOURCE_DIR;
    const auto missing = scratch_->file("absent.h5");
    int count = 0;
    for (const auto& entry : fs::directory_iterator{fs::path{source} / "configs"}) {
        if (entry.path().extension() != ".ini") continue;
        ++count;
        SCOPED_TRACE(entry.path().string());
        expect_error({"replay", missing, "--config", entry.path().string()}, {missing});
        expect_error({"simulate", "--config", entry.path().string(), "--frames", "0"},
                     {"simulate.frames"});
    }
    EXPECT_GE(count, 3);
}

TEST_F(CliTest, HelpAndVersionExitZero)
{
    EXPECT_EQ(run({"replay", "--help"}).exit_code, 0);
    EXPECT_EQ(run({"simulate", "--help"}).exit_code, 0);
    EXPECT_EQ(run({"bench", "--help"}).exit_code, 0);
    EXPECT_EQ(run({"--version"}).exit_code, 0);
    EXPECT_EQ(run({"no-such-command"}).exit_code, 2);
}

TEST_F(CliTest, ReplayBadInputs)
{
    const auto missing = scratch_->file("missing.h5");
    expect_error({"replay", missing}, {missing});
    expect_error({"replay"}, {"input"});
    expect_error({"replay", recording_, "--regularizer", "tv:-1"}, {"solver.regularizer", "tv:-1"});
    expect_error({"replay", recording_, "--regularizer", "wavelet:1"},
                 {"solver.regularizer", "wavelet"});
    expect_error({"replay", recording_, "--iterations", "0"}, {"solver.iterations", "0"});
    expect_error({"replay", recording_, "--iterations", "many"}, {"solver.iterations", "many"});
    expect_error({"replay", recording_, "--device", "gpu"}, {"pipeline.device", "gpu"});
    expect_error({"replay", recording_, "--timing", "slow"}, {"pipeline.timing", "slow"});
    expect_error({"replay", recording_, "--budget", "-5"}, {"pipeline.budget_ms", "-5"});
    expect_error({"replay", recording_, "--pipeline.workers", "0"}, {"pipeline.workers"});
    expect_error({"replay", recording_, "--solver.bogus", "1"}, {"solver.bogus"});
    if (kernels::cuda_device_count() == 0) {
        expect_error({"replay", recording_, "--device", "cuda"}, {"pipeline.device", "CUDA"});
    }
    const auto text = dir() / "not-hdf5.h5";
    std::ofstream{text} << "plain text\n";
    expect_error({"replay", text.string()}, {text.string()});
}

TEST_F(CliTest, ConfigFileErrorsNameTheFile)
{
    const auto missing = scratch_->file("missing.ini");
    expect_error({"replay", recording_, "--config", missing}, {missing});
    const auto syntax = dir() / "syntax.ini";
    std::ofstream{syntax} << "[solver]\nno equals sign here\n";
    expect_error({"replay", recording_, "--config", syntax.string()}, {syntax.string()});
    const auto unknown = dir() / "unknown.ini";
    std::ofstream{unknown} << "[solver]\niterations = 5\nflavour = vanilla\n";
    expect_error({"replay", recording_, "--config", unknown.string()},
                 {unknown.string(), "solver.flavour"});
    const auto zero = dir() / "zero.ini";
    std::ofstream{zero} << "[solver]\niterations = 0\n";
    expect_error({"replay", recording_, "--config", zero.string()}, {"solver.iterations"});
    const auto negative = dir() / "negative.ini";
    std::ofstream{negative} << "[solver]\nregularizer = laplacian:-2\n";
    expect_error({"replay", recording_, "--config", negative.string()}, {"solver.regularizer"});
}

TEST_F(CliTest, SimulateBadInputs)
{
    const auto out = scratch_->file("bad-sim.h5");
    expect_error({"simulate", "--output", out, "--geometry", "fanbeam"}, {"fanbeam"});
    expect_error({"simulate", "--output", out, "--system.nx", "-5"}, {"system.nx"});
    expect_error({"simulate", "--output", out, "--frames", "0"}, {"simulate.frames", "0"});
    expect_error({"simulate", "--output", out, "--simulate.phantom", "cat"}, {"simulate.phantom", "cat"});
    expect_error({"simulate", "--output", out, "--simulate.noise", "pink"}, {"simulate.noise"});
    expect_error({"simulate", "--output", (dir() / "no-dir" / "x.h5").string()}, {"simulate.output"});
    expect_error({"simulate", "--output", out, "--system.layout", "coo"}, {"system.layout"});
}

TEST_F(CliTest, BenchBadInputs)
{
    expect_error({"bench", "--repetitions", "0"}, {"bench.repetitions"});
    expect_error({"bench", "--device", "cpu", "--matrices", "huge"}, {"bench.matrices", "huge"});
    expect_error({"bench", "--device", "tpu"}, {"pipeline.device", "tpu"});
    expect_error({"bench", "--device", "cpu", "--tables", "solve,graphs"}, {"bench.tables", "graphs"});
    expect_error({"bench", "--device", "cpu", "--tables", ""}, {"bench.tables"});
}

// `--tables` measures only the tables it names: here the output stage's.
TEST_F(CliTest, BenchMeasuresTheTablesItIsAskedFor)
{
    const auto json = dir() / "bench-output.json";
    const RunResult r = run({"bench", "--device", "cpu", "--matrices", "small", "--tables", "output",
                             "--repetitions", "1", "--json", json.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto table = nlohmann::json::parse(read_text(json));
    ASSERT_FALSE(table["rows"].empty());
    for (const auto& row : table["rows"]) EXPECT_EQ(row["section"], "output") << row.dump();
}

TEST_F(CliTest, NonFiniteDataIsRejectedNamingTheDataset)
{
    const auto bad = dir() / "nan.h5";
    fs::copy_file(recording_, bad, fs::copy_options::overwrite_existing);
    {
        const auto file = hdf5::File::open(bad.string(), hdf5::File::Mode::read_write);
        const auto data = file.open_dataset("/entry/sensors/sensor1/data");
        const float nan = std::nanf("");
        data.write_slab<float>({1, 2, 3}, {1, 1, 1}, std::span<const float>{&nan, 1});
    }
    expect_error({"replay", bad.string(), "--output", scratch_->file("nan-out")},
                 {bad.string(), "sensor1"});
}

}  // namespace
}  // namespace recon::pipeline
