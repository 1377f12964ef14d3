#pragma once
// The latency picture of DESIGN §8: per frame (in completion order) a bar
// stacked from the stage times, and the budget as a line. Plain SVG.

#include <string>
#include <vector>

#include "pipeline/latency_report.hpp"

namespace recon::pipeline {

/// The SVG document text.
std::string latency_svg(const std::vector<FrameLatency>& frames, double budget_ms,
                        const std::string& title);

/// Writes latency_svg() to `path`; throws std::runtime_error naming it.
void write_latency_svg(const std::vector<FrameLatency>& frames, double budget_ms,
                       const std::string& title, const std::string& path);

}  // namespace recon::pipeline
