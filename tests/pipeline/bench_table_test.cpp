// `recon bench`'s table: rows grouped by section and problem whatever order
// they were measured in, and the ratio column.

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/bench.hpp"

namespace recon::pipeline {
namespace {

BenchRow row(const std::string& section, const std::string& problem, const std::string& variant,
             double ms)
{
    return {section, problem, variant, "cpu", Timing{{ms}}, ""};
}

std::vector<std::string> variants(const BenchTable& table)
{
    std::vector<std::string> out;
    for (const BenchRow& r : table.rows()) out.push_back(r.variant);
    return out;
}

TEST(BenchTable, RowsMeasuredLaterJoinTheirSectionAndProblem)
{
    BenchTable table;
    table.add(row("batch", "large", "together 1", 1.0));
    table.add(row("batch", "large", "together 4", 2.0));
    table.add(row("batch", "small", "together 1", 3.0));
    table.add(row("solve", "ct", "graph", 4.0));
    table.add(row("batch", "large", "per stream 1", 5.0));  // measured last
    table.add(row("batch", "small", "per stream 1", 6.0));
    table.add(row("output", "ct", "write", 7.0));  // a new table goes to the end
    EXPECT_EQ(variants(table),
              (std::vector<std::string>{"together 1", "together 4", "per stream 1", "together 1",
                                        "per stream 1", "graph", "write"}));
    EXPECT_EQ(table.rows()[2].problem, "large");
    EXPECT_EQ(table.rows()[4].problem, "small");

    std::ostringstream printed;
    table.print(printed);
    const std::string text = printed.str();
    ASSERT_NE(text.find("== batch — large"), std::string::npos) << text;
    EXPECT_EQ(text.find("== batch — large"), text.rfind("== batch — large"))
        << "one heading per section and problem:\n"
        << text;
}

TEST(BenchTable, RatioToTheSectionsBaselineOfTheSameProblem)
{
    BenchTable table;
    table.set_baseline("solve", "baseline");
    table.add(row("solve", "large", "ours", 2.0));
    table.add(row("solve", "small", "baseline", 5.0));
    table.add(row("solve", "large", "baseline", 8.0));
    table.add(row("batch", "large", "ours", 1.0));
    ASSERT_NE(table.find("solve", "large", "ours"), nullptr);
    EXPECT_DOUBLE_EQ(*table.ratio(*table.find("solve", "large", "ours")), 0.25);
    EXPECT_DOUBLE_EQ(*table.ratio(*table.find("solve", "small", "baseline")), 1.0);
    EXPECT_FALSE(table.ratio(*table.find("batch", "large", "ours")).has_value());
}

}  // namespace
}  // namespace recon::pipeline
