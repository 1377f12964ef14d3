#include "pipeline/latency_report.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numeric>
#include <ostream>
#include <stdexcept>

namespace recon::pipeline {

nlohmann::json to_json(const FrameLatency& f, double budget_ms)
{
    nlohmann::json j;
    j["sensor"] = f.sensor;
    j["frame_id"] = f.frame_id;
    j["t_arrival_ns"] = f.t_arrival_ns;
    for (const Stage stage : all_stages) {
        j[std::string{to_string(stage)} + "_ms"] = f.times[stage];
    }
    j["total_ms"] = f.times.total_ms;
    j["iterations"] = f.iterations;
    j["rel_gradient"] = f.rel_gradient;
    j["status"] = kernels::to_string(f.status);
    j["budget_ms"] = budget_ms;
    j["missed"] = f.missed;
    if (f.quality) {
        // JSON has no infinity: an exact image has PSNR null.
        j["psnr_db"] = std::isfinite(f.quality->psnr_db) ? nlohmann::json(f.quality->psnr_db)
                                                         : nlohmann::json(nullptr);
        if (f.quality->ssim) j["ssim"] = *f.quality->ssim;
    }
    return j;
}

double percentile(std::vector<double> values, double q)
{
    if (values.empty()) throw std::invalid_argument{"percentile: no values"};
    if (!(q >= 0.0 && q <= 100.0)) {
        throw std::invalid_argument{"percentile: expected q in [0, 100], found " +
                                    std::to_string(q)};
    }
    std::sort(values.begin(), values.end());
    const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const auto hi = std::min(lo + 1, values.size() - 1);
    const double t = rank - static_cast<double>(lo);
    return values[lo] + t * (values[hi] - values[lo]);
}

Distribution distribution(const std::vector<double>& values)
{
    if (values.empty()) return {};
    Distribution d;
    d.p50 = percentile(values, 50);
    d.p90 = percentile(values, 90);
    d.p99 = percentile(values, 99);
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    d.min = *lo;
    d.max = *hi;
    d.mean = std::accumulate(values.begin(), values.end(), 0.0) /
             static_cast<double>(values.size());
    return d;
}

// --- recorder ---------------------------------------------------------------

LatencyRecorder::LatencyRecorder(const std::string& report_path, double budget_ms,
                                 std::string device)
    : report_path_{report_path}, budget_ms_{budget_ms}, device_{std::move(device)}
{
    if (!report_path_.empty()) {
        report_.open(report_path_, std::ios::out | std::ios::trunc);
        if (!report_) {
            throw std::runtime_error{"report '" + report_path_ +
                                     "': cannot be created (expected a writable path)"};
        }
    }
}

void LatencyRecorder::write_record(const Reconstruction& r)
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
    if (report_.is_open()) {
        report_ << to_json(f, budget_ms_).dump() << '\n';
        report_.flush();  // a reader (or a crash) sees every finished frame
    }
    frames_.push_back(std::move(f));
}

void LatencyRecorder::close()
{
    if (report_.is_open()) {
        report_.close();
        if (report_.fail()) {
            throw std::runtime_error{"report '" + report_path_ + "': write failed"};
        }
    }
}

LatencySummary LatencyRecorder::summary() const
{
    LatencySummary s;
    s.device = device_;
    s.budget_ms = budget_ms_;
    s.count = static_cast<std::int64_t>(frames_.size());
    s.dropped = dropped_;
    s.failed = failed_;
    std::map<std::string, std::vector<double>> stage_values;
    std::vector<double> iterations, psnr, ssim;
    std::int64_t first_ns = std::numeric_limits<std::int64_t>::max();
    std::int64_t last_ns = 0;
    for (const auto& f : frames_) {
        s.missed += f.missed ? 1 : 0;
        for (const Stage stage : all_stages) stage_values[to_string(stage)].push_back(f.times[stage]);
        stage_values["total"].push_back(f.times.total_ms);
        iterations.push_back(f.iterations);
        if (f.quality) {
            if (std::isfinite(f.quality->psnr_db)) psnr.push_back(f.quality->psnr_db);
            if (f.quality->ssim) ssim.push_back(*f.quality->ssim);
        }
        const auto done_ns = f.t_arrival_ns + static_cast<std::int64_t>(f.times.total_ms * 1e6);
        first_ns = std::min(first_ns, f.t_arrival_ns);
        last_ns = std::max(last_ns, done_ns);
    }
    for (const auto& [name, values] : stage_values) s.stages[name] = distribution(values);
    s.iterations = distribution(iterations);
    if (!psnr.empty()) s.psnr_db = distribution(psnr);
    if (!ssim.empty()) s.ssim = distribution(ssim);
    if (!frames_.empty()) {
        s.wall_s = static_cast<double>(last_ns - first_ns) * 1e-9;
        s.frames_per_s = s.wall_s > 0 ? static_cast<double>(s.count) / s.wall_s : 0.0;
    }
    return s;
}

// --- summary output -----------------------------------------------------

namespace {

nlohmann::json to_json(const Distribution& d)
{
    return {{"min", d.min}, {"p50", d.p50}, {"p90", d.p90},
            {"p99", d.p99}, {"max", d.max}, {"mean", d.mean}};
}

const char* const stage_rows[] = {"queue", "upload", "solve", "download", "write", "total"};

}  // namespace

nlohmann::json to_json(const LatencySummary& s)
{
    nlohmann::json j;
    j["device"] = s.device;
    j["budget_ms"] = s.budget_ms;
    j["count"] = s.count;
    j["dropped"] = s.dropped;
    j["failed"] = s.failed;
    j["missed"] = s.missed;
    j["wall_s"] = s.wall_s;
    j["frames_per_s"] = s.frames_per_s;
    nlohmann::json stages = nlohmann::json::object();
    for (const char* name : stage_rows) {
        if (const auto it = s.stages.find(name); it != s.stages.end()) {
            stages[std::string{name} + "_ms"] = to_json(it->second);
        }
    }
    j["stages"] = stages;
    j["iterations"] = to_json(s.iterations);
    if (s.psnr_db) j["psnr_db"] = to_json(*s.psnr_db);
    if (s.ssim) j["ssim"] = to_json(*s.ssim);
    return j;
}

void print_summary(const LatencySummary& s, std::ostream& out)
{
    const auto flags = out.flags();
    const auto precision = out.precision();
    out << "frames " << s.count << "  dropped " << s.dropped << "  failed " << s.failed
        << "  missed " << s.missed << " (budget " << s.budget_ms << " ms)  device " << s.device
        << "\n";
    out << std::fixed << std::setprecision(3);
    out << std::left << std::setw(10) << "stage" << std::right;
    for (const char* column : {"p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms"}) {
        out << std::setw(12) << column;
    }
    out << "\n";
    const auto row = [&](const std::string& name, const Distribution& d) {
        out << std::left << std::setw(10) << name << std::right << std::setw(12) << d.p50
            << std::setw(12) << d.p90 << std::setw(12) << d.p99 << std::setw(12) << d.max
            << std::setw(12) << d.mean << "\n";
    };
    for (const char* name : stage_rows) {
        if (const auto it = s.stages.find(name); it != s.stages.end()) row(name, it->second);
    }
    out << std::setprecision(1) << "iterations p50 " << s.iterations.p50 << "  max "
        << s.iterations.max << "   throughput " << std::setprecision(2) << s.frames_per_s
        << " frames/s over " << s.wall_s << " s\n";
    if (s.psnr_db) {
        out << std::setprecision(2) << "PSNR dB   mean " << s.psnr_db->mean << "  min "
            << s.psnr_db->min << "  max " << s.psnr_db->max << "\n";
    }
    if (s.ssim) {
        out << std::setprecision(4) << "SSIM      mean " << s.ssim->mean << "  min "
            << s.ssim->min << "  max " << s.ssim->max << "\n";
    }
    out.flags(flags);
    out.precision(precision);
}

void write_summary_json(const LatencySummary& summary, const std::string& path)
{
    std::ofstream file{path, std::ios::out | std::ios::trunc};
    if (!file) {
        throw std::runtime_error{"summary '" + path + "': cannot be created (expected a writable path)"};
    }
    file << to_json(summary).dump(2) << '\n';
    if (!file) throw std::runtime_error{"summary '" + path + "': write failed"};
}

}  // namespace recon::pipeline
