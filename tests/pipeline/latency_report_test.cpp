// Latency statistics, the JSON Lines report, the summary JSON and the SVG.

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline/latency_plot.hpp"
#include "pipeline/latency_report.hpp"
#include "temp_dir.hpp"

namespace recon::pipeline {
namespace {

TEST(Percentile, LinearInterpolationAsNumpy)
{
    // numpy.percentile([4, 1, 3, 2], [0, 50, 90, 99, 100]) = 1, 2.5, 3.7, 3.97, 4
    const std::vector<double> v{4, 1, 3, 2};
    EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
    EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
    EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
    EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
    EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
    EXPECT_DOUBLE_EQ(percentile({7.5}, 90), 7.5);
    EXPECT_THROW((void)percentile({}, 50), std::invalid_argument);
    EXPECT_THROW((void)percentile(v, 101), std::invalid_argument);
}

Reconstruction random_frame(std::int64_t id, double budget, std::mt19937& rng)
{
    std::uniform_real_distribution<double> ms{0.1, 10.0};
    Reconstruction r;
    r.sensor.assign(1, id % 2 == 0 ? 'a' : 'b');
    r.frame_id = id;
    r.t_arrival_ns = 1'000'000'000 + id * 5'000'000;
    double total = 0;
    for (const Stage s : all_stages) total += (r.times[s] = ms(rng));
    r.times.total_ms = total;
    r.budget_ms = budget;
    r.deadline_missed = total > budget;
    r.result.iterations = 10 + static_cast<int>(id);
    r.result.rel_gradient = 0.5;
    r.result.status = recon::SolveStatus::max_iterations;
    if (id % 3 == 0) r.quality = Quality{20.0 + static_cast<double>(id), 0.5};
    return r;
}

class ReportTest : public ::testing::Test {
protected:
    test::TempDir scratch_;
};

TEST_F(ReportTest, RecorderWritesOneJsonLinePerFrameAndSummarizes)
{
    std::mt19937 rng{std::random_device{}()};
    const double budget = 25.0;
    const auto report = scratch_.file("frames.jsonl");
    LatencyRecorder recorder{report, budget, "cpu"};
    std::vector<Reconstruction> frames;
    for (int i = 0; i < 11; ++i) frames.push_back(random_frame(i, budget, rng));
    for (const auto& f : frames) recorder.write_record(f);
    recorder.add_dropped(3);
    recorder.close();

    std::ifstream in{report};
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(lines.size(), frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(lines[i]["frame_id"], frames[i].frame_id);
        EXPECT_EQ(lines[i]["sensor"], frames[i].sensor);
        EXPECT_DOUBLE_EQ(lines[i]["solve_ms"].get<double>(), frames[i].times[Stage::solve]);
        EXPECT_DOUBLE_EQ(lines[i]["total_ms"].get<double>(), frames[i].times.total_ms);
        EXPECT_EQ(lines[i]["missed"], frames[i].deadline_missed);
        EXPECT_EQ(lines[i]["status"], "max_iterations");
        EXPECT_EQ(lines[i]["budget_ms"], budget);
        EXPECT_EQ(lines[i].contains("ssim"), frames[i].quality.has_value());
    }

    const LatencySummary s = recorder.summary();
    std::vector<double> totals, solves;
    std::int64_t missed = 0;
    for (const auto& f : frames) {
        totals.push_back(f.times.total_ms);
        solves.push_back(f.times[Stage::solve]);
        missed += f.deadline_missed ? 1 : 0;
    }
    EXPECT_EQ(s.count, 11);
    EXPECT_EQ(s.dropped, 3);
    EXPECT_EQ(s.missed, missed);
    EXPECT_DOUBLE_EQ(s.stages.at("total").p50, percentile(totals, 50));
    EXPECT_DOUBLE_EQ(s.stages.at("solve").p99, percentile(solves, 99));
    EXPECT_DOUBLE_EQ(s.stages.at("total").max, *std::max_element(totals.begin(), totals.end()));
    ASSERT_TRUE(s.psnr_db.has_value());
    EXPECT_DOUBLE_EQ(s.psnr_db->mean, (20.0 + 23.0 + 26.0 + 29.0) / 4.0);  // frames 0, 3, 6, 9

    const auto summary_path = scratch_.file("summary.json");
    write_summary_json(s, summary_path);
    std::ifstream summary_file{summary_path};
    const auto j = nlohmann::json::parse(summary_file);
    EXPECT_EQ(j["count"], 11);
    EXPECT_EQ(j["dropped"], 3);
    EXPECT_DOUBLE_EQ(j["stages"]["total_ms"]["p90"].get<double>(), percentile(totals, 90));

    std::ostringstream table;
    print_summary(s, table);
    EXPECT_NE(table.str().find("total"), std::string::npos);
    EXPECT_NE(table.str().find("missed " + std::to_string(missed)), std::string::npos);
}

TEST_F(ReportTest, SvgHasABarPerStageAndTheBudgetLine)
{
    std::mt19937 rng{std::random_device{}()};
    LatencyRecorder recorder{"", 5.0, "cpu"};
    for (int i = 0; i < 6; ++i) recorder.write_record(random_frame(i, 5.0, rng));
    const auto path = scratch_.file("latency.svg");
    write_latency_svg(recorder.frames(), 5.0, "test <plot>", path);
    std::ifstream in{path};
    const std::string svg{std::istreambuf_iterator<char>{in}, {}};
    EXPECT_EQ(svg.rfind("<svg", 0), 0U);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_NE(svg.find("test &lt;plot&gt;"), std::string::npos);
    EXPECT_NE(svg.find("budget 5 ms"), std::string::npos);
    std::size_t bars = 0;
    for (auto at = svg.find("<rect x="); at != std::string::npos; at = svg.find("<rect x=", at + 1)) {
        ++bars;
    }
    // 6 frames x 5 stages, the frame, 5 legend swatches, the missed marks.
    std::size_t missed = 0;
    for (const auto& f : recorder.frames()) missed += f.missed ? 1 : 0;
    EXPECT_EQ(bars, 6U * 5U + 1U + 5U + 1U + missed);
}

TEST_F(ReportTest, UnwritablePathsNameTheFile)
{
    const auto bad = (scratch_.path() / "no-such-dir" / "x.jsonl").string();
    try {
        LatencyRecorder recorder{bad, 1.0, "cpu"};
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string{e.what()}.find(bad), std::string::npos);
    }
    EXPECT_THROW(write_summary_json(LatencySummary{}, bad), std::runtime_error);
    EXPECT_THROW(write_latency_svg({}, 1.0, "t", bad), std::runtime_error);
}

}  // namespace
}  // namespace recon::pipeline
