// Config loading: command line, INI files, aliases, precedence, and every
// kind of bad input giving a one-line error that names the option or file.

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "pipeline/config.hpp"
#include "pipeline/run_config.hpp"
#include "temp_dir.hpp"

namespace recon::pipeline {
namespace {

class ConfigTest : public ::testing::Test {
protected:
    std::string write_file(const std::string& name, const std::string& text)
    {
        const auto path = scratch_.file(name);
        std::ofstream{path} << text;
        return path;
    }

    test::TempDir scratch_;
};

/// Parses args into a fresh RunConfig; returns the loader's error, or "".
std::string parse_error(const Args& args, RunConfig& config)
{
    ConfigLoader loader{"replay", "test"};
    add_run_options(loader, config, true);
    std::ostringstream out;
    try {
        loader.parse(args, out);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

void expect_one_line_naming(const std::string& message, const std::string& name)
{
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST_F(ConfigTest, CommandLineDottedNamesAliasesAndPositional)
{
    RunConfig c;
    ASSERT_EQ(parse_error({"rec.h5", "--solver.iterations", "17", "--device", "cpu",
                           "--regularizer=tv:0.5", "--system.center_offset", "-2.5",
                           "--budget", "12.5"},
                          c),
              "");
    EXPECT_EQ(c.input, "rec.h5");
    EXPECT_EQ(c.solver.iterations, 17);
    EXPECT_EQ(c.pipeline.device, "cpu");
    EXPECT_EQ(c.solver.regularizer, "tv:0.5");
    EXPECT_DOUBLE_EQ(c.system.spec.center_offset, -2.5);
    EXPECT_DOUBLE_EQ(c.pipeline.budget_ms, 12.5);
}

TEST_F(ConfigTest, IniFileValuesAndCommandLineWins)
{
    const auto ini = write_file("a.ini",
                                "[solver]\niterations = 33\nregularizer = nonneg:2\n"
                                "[pipeline]\nbudget_ms = 7\nwarm_start = false\n"
                                "[system]\ngeometry = synthetic\nrows = 1234\n");
    RunConfig c;
    ASSERT_EQ(parse_error({"--config", ini, "--iterations", "5"}, c), "");
    EXPECT_EQ(c.solver.iterations, 5);  // command line over file
    EXPECT_EQ(c.solver.regularizer, "nonneg:2");
    EXPECT_DOUBLE_EQ(c.pipeline.budget_ms, 7.0);
    EXPECT_FALSE(c.pipeline.warm_start);
    EXPECT_EQ(c.system.spec.geometry, "synthetic");
    EXPECT_EQ(c.system.spec.rows, 1234);
}

TEST_F(ConfigTest, EffectiveTextReadsBackToTheSameValues)
{
    std::mt19937 rng{std::random_device{}()};
    const int iterations = std::uniform_int_distribution<int>{1, 1000}(rng);
    const double budget = std::uniform_real_distribution<double>{1.0, 500.0}(rng);
    RunConfig first;
    ConfigLoader loader{"replay", "test"};
    add_run_options(loader, first, true);
    std::ostringstream out;
    ASSERT_TRUE(loader.parse({"in.h5", "--iterations", std::to_string(iterations), "--budget",
                              std::to_string(budget), "--regularizer", "tv:0.01,nonneg:5"},
                             out));
    const auto path = write_file("effective.ini", loader.effective_text());

    RunConfig second;
    ASSERT_EQ(parse_error({"--config", path}, second), "");
    EXPECT_EQ(second.input, "in.h5");
    EXPECT_EQ(second.solver.iterations, iterations);
    EXPECT_DOUBLE_EQ(second.pipeline.budget_ms, first.pipeline.budget_ms);
    EXPECT_EQ(second.solver.regularizer, "tv:0.01,nonneg:5");
    EXPECT_EQ(second.system.spec.nx, first.system.spec.nx);
    EXPECT_NE(loader.effective_text().find("[solver]"), std::string::npos);
}

TEST_F(ConfigTest, MissingConfigFileNamesTheFile)
{
    RunConfig c;
    const auto missing = scratch_.file("nope.ini");
    const auto error = parse_error({"--config", missing}, c);
    expect_one_line_naming(error, missing);
}

TEST_F(ConfigTest, UnknownIniOptionNamesFileAndOption)
{
    const auto ini = write_file("bad.ini", "[solver]\niterationz = 3\n");
    RunConfig c;
    const auto error = parse_error({"--config", ini}, c);
    expect_one_line_naming(error, ini);
    expect_one_line_naming(error, "solver.iterationz");
}

TEST_F(ConfigTest, SectionsOfOtherCommandsAreSkippedUnknownSectionsAreNot)
{
    // One scenario file for every command: [bench] and [daemon] are read by
    // other commands and skipped here.
    const auto shared = write_file("shared.ini",
                                   "[solver]\niterations = 9\n[bench]\nrepetitions = 3\n"
                                   "[daemon]\nconnect = tcp://127.0.0.1:1\n");
    RunConfig c;
    ASSERT_EQ(parse_error({"--config", shared}, c), "");
    EXPECT_EQ(c.solver.iterations, 9);

    const auto typo = write_file("typo.ini", "[solvr]\niterations = 9\n");
    RunConfig d;
    const auto error = parse_error({"--config", typo}, d);
    expect_one_line_naming(error, typo);
    expect_one_line_naming(error, "solvr.iterations");
}

TEST_F(ConfigTest, BadIniSyntaxNamesTheFile)
{
    const auto ini = write_file("syntax.ini", "[solver]\nthis line has no equals sign\n");
    RunConfig c;
    const auto error = parse_error({"--config", ini}, c);
    expect_one_line_naming(error, ini);
}

TEST_F(ConfigTest, BadIniValueNamesTheOption)
{
    const auto ini = write_file("value.ini", "[solver]\niterations = many\n");
    RunConfig c;
    const auto error = parse_error({"--config", ini}, c);
    expect_one_line_naming(error, ini);
    expect_one_line_naming(error, "solver.iterations");
}

TEST_F(ConfigTest, UnknownCommandLineOption)
{
    RunConfig c;
    expect_one_line_naming(parse_error({"--solver.bogus", "1"}, c), "solver.bogus");
}

TEST(SolverConfig, ZeroOrNegativeIterationsAreRejected)
{
    for (const int bad : {0, -3}) {
        SolverConfig c;
        c.iterations = bad;
        try {
            (void)c.options();
            FAIL() << "iterations " << bad << " accepted";
        } catch (const std::invalid_argument& e) {
            expect_one_line_naming(e.what(), "solver.iterations");
            expect_one_line_naming(e.what(), std::to_string(bad));
        }
    }
}

TEST(SolverConfig, BadFormAndToleranceAreRejected)
{
    SolverConfig form;
    form.form = "cgls9";
    EXPECT_THROW((void)form.options(), std::invalid_argument);
    SolverConfig launch;
    launch.launch = "rocket";
    EXPECT_THROW((void)launch.options(), std::invalid_argument);
    SolverConfig tol;
    tol.tolerance = -1e-3;
    try {
        (void)tol.options();
        FAIL();
    } catch (const std::invalid_argument& e) {
        expect_one_line_naming(e.what(), "solver.tolerance");
    }
}

TEST(SolverConfig, RegularizerErrorsNameTheOption)
{
    for (const std::string bad : {"tv:-0.5", "wavelet:1", "tv:abc"}) {
        SolverConfig c;
        c.regularizer = bad;
        try {
            (void)c.make_regularizer();
            FAIL() << bad << " accepted";
        } catch (const std::invalid_argument& e) {
            expect_one_line_naming(e.what(), "solver.regularizer");
            expect_one_line_naming(e.what(), bad);
        }
    }
    SolverConfig good;
    good.regularizer = "tv:0.01,nonneg:5";
    EXPECT_FALSE(good.make_regularizer().empty());
}

TEST(PipelineConfig, BadValuesNameTheOption)
{
    const auto check = [](auto mutate, const std::string& option) {
        PipelineConfig c;
        mutate(c);
        try {
            c.validate();
            FAIL() << option << " accepted";
        } catch (const std::invalid_argument& e) {
            expect_one_line_naming(e.what(), option);
        }
    };
    check([](PipelineConfig& c) { c.device = "gpu"; }, "pipeline.device");
    check([](PipelineConfig& c) { c.budget_ms = -1; }, "pipeline.budget_ms");
    check([](PipelineConfig& c) { c.timing = "slow"; }, "pipeline.timing");
    check([](PipelineConfig& c) { c.workers = 0; }, "pipeline.workers");
    check([](PipelineConfig& c) { c.queue_capacity = 0; }, "pipeline.queue_capacity");
    check([](PipelineConfig& c) { c.drop_policy = "random"; }, "pipeline.drop_policy");
    PipelineConfig ok;
    EXPECT_NO_THROW(ok.validate());
}

TEST(SystemConfig, BadLayoutNamesTheOption)
{
    SystemConfig c;
    c.layout = "coo";
    try {
        (void)c.resolved();
        FAIL();
    } catch (const std::invalid_argument& e) {
        expect_one_line_naming(e.what(), "system.layout");
    }
    c.layout = "sliced_ell";
    EXPECT_EQ(c.resolved().layout, recon::MatrixLayout::sliced_ell);
}

TEST(OutputConfig, PathsDefaultIntoTheFolder)
{
    OutputConfig c;
    c.dir = "out/run1";
    EXPECT_EQ(c.file_path(), "out/run1/reconstruction.h5");
    EXPECT_EQ(c.report_path(), "out/run1/frames.jsonl");
    c.plot = "elsewhere.svg";
    EXPECT_EQ(c.plot_path(), "elsewhere.svg");
}

}  // namespace
}  // namespace recon::pipeline
