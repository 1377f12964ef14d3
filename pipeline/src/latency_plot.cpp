#include "pipeline/latency_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace recon::pipeline {

namespace {

constexpr double width = 900, height = 420;
constexpr double left = 70, right = 150, top = 40, bottom = 50;
constexpr const char* stage_colors[stage_count] = {"#9e9e9e", "#42a5f5", "#1565c0", "#66bb6a",
                                                   "#ffa726"};

/// A round step for about `target` ticks over [0, top].
double tick_step(double top_value, int target = 6)
{
    const double raw = top_value / target;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (const double m : {1.0, 2.0, 5.0, 10.0}) {
        if (raw <= m * magnitude) return m * magnitude;
    }
    return 10.0 * magnitude;
}

std::string escape(const std::string& text)
{
    std::string out;
    for (const char c : text) {
        switch (c) {
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '&': out += "&amp;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

}  // namespace

std::string latency_svg(const std::vector<FrameLatency>& frames, double budget_ms,
                        const std::string& title)
{
    double peak = budget_ms;
    for (const auto& f : frames) {
        double stacked = 0;
        for (const Stage s : all_stages) stacked += f.times[s];
        peak = std::max({peak, f.times.total_ms, stacked});
    }
    const double y_top = peak * 1.1 > 0 ? peak * 1.1 : 1.0;
    const double plot_w = width - left - right, plot_h = height - top - bottom;
    const auto y_of = [&](double ms) { return top + plot_h * (1.0 - ms / y_top); };
    const double n = std::max<double>(1.0, static_cast<double>(frames.size()));
    const double bar_w = plot_w / n;

    std::ostringstream svg;
    svg.precision(5);
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
        << height << "\" viewBox=\"0 0 " << width << ' ' << height
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << escape(title) << "</text>\n";

    // Axes and ticks.
    const double step = tick_step(y_top);
    for (double v = 0; v <= y_top + 1e-9; v += step) {
        svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y_of(v)
            << "\" y2=\"" << y_of(v) << "\" stroke=\"#e0e0e0\"/>\n"
            << "<text x=\"" << left - 6 << "\" y=\"" << y_of(v) + 4
            << "\" text-anchor=\"end\">" << v << "</text>\n";
    }
    svg << "<text transform=\"translate(18," << top + plot_h / 2
        << ") rotate(-90)\" text-anchor=\"middle\">latency (ms)</text>\n"
        << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 12
        << "\" text-anchor=\"middle\">frame (completion order), " << frames.size()
        << " frames</text>\n";

    // Stacked stage bars.
    svg << "<g shape-rendering=\"crispEdges\">\n";
    for (std::size_t i = 0; i < frames.size(); ++i) {
        double base = 0;
        const double x = left + bar_w * static_cast<double>(i);
        for (const Stage s : all_stages) {
            const double ms = frames[i].times[s];
            if (ms <= 0) continue;
            svg << "<rect x=\"" << x << "\" y=\"" << y_of(base + ms) << "\" width=\""
                << std::max(bar_w * 0.9, 0.5) << "\" height=\"" << y_of(base) - y_of(base + ms)
                << "\" fill=\"" << stage_colors[static_cast<int>(s)] << "\"/>\n";
            base += ms;
        }
        if (frames[i].missed) {
            svg << "<rect x=\"" << x << "\" y=\"" << top + plot_h + 2 << "\" width=\""
                << std::max(bar_w * 0.9, 0.5) << "\" height=\"4\" fill=\"#d32f2f\"/>\n";
        }
    }
    svg << "</g>\n";

    // Budget line, axes frame, legend.
    svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y_of(budget_ms)
        << "\" y2=\"" << y_of(budget_ms)
        << "\" stroke=\"#d32f2f\" stroke-width=\"2\" stroke-dasharray=\"6,4\"/>\n"
        << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\""
        << plot_h << "\" fill=\"none\" stroke=\"#424242\"/>\n";
    double ly = top + 10;
    const double lx = left + plot_w + 16;
    for (const Stage s : all_stages) {
        svg << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"12\" fill=\""
            << stage_colors[static_cast<int>(s)] << "\"/><text x=\"" << lx + 18 << "\" y=\""
            << ly + 1 << "\">" << to_string(s) << "</text>\n";
        ly += 20;
    }
    svg << "<line x1=\"" << lx << "\" x2=\"" << lx + 12 << "\" y1=\"" << ly - 3 << "\" y2=\""
        << ly - 3 << "\" stroke=\"#d32f2f\" stroke-width=\"2\"/><text x=\"" << lx + 18
        << "\" y=\"" << ly + 1 << "\">budget " << budget_ms << " ms</text>\n";
    ly += 20;
    svg << "<rect x=\"" << lx << "\" y=\"" << ly - 5 << "\" width=\"12\" height=\"4\" "
        << "fill=\"#d32f2f\"/><text x=\"" << lx + 18 << "\" y=\"" << ly + 1
        << "\">missed</text>\n";
    svg << "</svg>\n";
    return svg.str();
}

void write_latency_svg(const std::vector<FrameLatency>& frames, double budget_ms,
                       const std::string& title, const std::string& path)
{
    std::ofstream file{path, std::ios::out | std::ios::trunc};
    if (!file) {
        throw std::runtime_error{"plot '" + path + "': cannot be created (expected a writable path)"};
    }
    file << latency_svg(frames, budget_ms, title);
    if (!file) throw std::runtime_error{"plot '" + path + "': write failed"};
}

}  // namespace recon::pipeline
