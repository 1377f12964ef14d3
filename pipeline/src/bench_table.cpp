#include "pipeline/bench.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace recon::pipeline {

namespace {

double median_of(std::vector<double> v)
{
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t mid = v.size() / 2;
    return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

}  // namespace

double Timing::median() const { return median_of(runs_ms); }
double Timing::min() const
{
    return runs_ms.empty() ? 0.0 : *std::min_element(runs_ms.begin(), runs_ms.end());
}
double Timing::max() const
{
    return runs_ms.empty() ? 0.0 : *std::max_element(runs_ms.begin(), runs_ms.end());
}

Timing measure(int warmup, int repetitions, const std::function<double()>& run_once_ms)
{
    for (int i = 0; i < warmup; ++i) run_once_ms();
    Timing t;
    for (int i = 0; i < repetitions; ++i) t.runs_ms.push_back(run_once_ms());
    return t;
}

double host_timed_ms(const kernels::Executor& exec, const std::function<void()>& work)
{
    exec.synchronize();
    const auto start = std::chrono::steady_clock::now();
    work();
    exec.synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

void BenchTable::add(BenchRow row)
{
    const auto same_table = [&](const BenchRow& r) {
        return r.section == row.section && r.problem == row.problem;
    };
    const auto last = std::find_if(rows_.rbegin(), rows_.rend(), same_table);
    // base() of the reverse iterator is the position just after that row.
    rows_.insert(last == rows_.rend() ? rows_.end() : last.base(), std::move(row));
}

void BenchTable::set_baseline(const std::string& section, const std::string& variant)
{
    baselines_.emplace_back(section, variant);
}

const BenchRow* BenchTable::find(const std::string& section, const std::string& problem,
                                 const std::string& variant) const
{
    for (const auto& row : rows_) {
        if (row.section == section && row.problem == problem && row.variant == variant) {
            return &row;
        }
    }
    return nullptr;
}

std::optional<double> BenchTable::ratio(const BenchRow& row) const
{
    for (const auto& [section, variant] : baselines_) {
        if (section != row.section) continue;
        const BenchRow* base = find(section, row.problem, variant);
        if (base != nullptr && base->timing.median() > 0) {
            return row.timing.median() / base->timing.median();
        }
    }
    return std::nullopt;
}

void BenchTable::print(std::ostream& out) const
{
    const auto flags = out.flags();
    const auto precision = out.precision();
    if (!machine_.empty()) out << "machine: " << machine_.dump() << "\n";
    std::string section, problem;
    for (const auto& row : rows_) {
        if (row.section != section || row.problem != problem) {
            section = row.section;
            problem = row.problem;
            out << "\n== " << section << " — " << problem << "\n"
                << std::left << std::setw(44) << "variant" << std::setw(10) << "device"
                << std::right << std::setw(12) << "median ms" << std::setw(11) << "min ms"
                << std::setw(11) << "max ms" << std::setw(6) << "runs" << std::setw(9)
                << "ratio" << "  note\n";
        }
        out << std::left << std::setw(44) << row.variant << std::setw(10)
            << row.device.substr(0, 9) << std::right << std::fixed << std::setprecision(3)
            << std::setw(12) << row.timing.median() << std::setw(11) << row.timing.min()
            << std::setw(11) << row.timing.max() << std::setw(6) << row.timing.runs_ms.size();
        if (const auto r = ratio(row)) {
            out << std::setw(9) << std::setprecision(2) << *r;
        } else {
            out << std::setw(9) << "-";
        }
        out << "  " << row.note << "\n";
    }
    out.flags(flags);
    out.precision(precision);
}

nlohmann::json BenchTable::to_json() const
{
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : rows_) {
        nlohmann::json j{{"section", row.section},
                         {"problem", row.problem},
                         {"variant", row.variant},
                         {"device", row.device},
                         {"median_ms", row.timing.median()},
                         {"min_ms", row.timing.min()},
                         {"max_ms", row.timing.max()},
                         {"runs_ms", row.timing.runs_ms},
                         {"note", row.note}};
        if (const auto r = ratio(row)) j["ratio_to_baseline"] = *r;
        rows.push_back(std::move(j));
    }
    nlohmann::json baselines = nlohmann::json::object();
    for (const auto& [section, variant] : baselines_) baselines[section] = variant;
    return {{"machine", machine_}, {"baselines", baselines}, {"rows", rows}};
}

}  // namespace recon::pipeline
