#pragma once
// `recon bench` building blocks: a table of timed rows (printed and written
// as JSON), the measurement loop (warm-up, repetitions, median), and the
// paper problems. Each backend adds its rows to the same table: the CPU rows
// live in bench_cpu.cpp; GPU rows (cuSPARSE, our kernels, graphs, batching)
// are further add_* functions over the same BenchProblem and BenchTable.

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/executor.hpp"
#include "pipeline/config.hpp"
#include "recon/system_model.hpp"

namespace recon::pipeline {

/// Times of repeated runs of one measurement (ms).
struct Timing {
    std::vector<double> runs_ms;
    double median() const;
    double min() const;
    double max() const;
};

/// Runs `run_once_ms` (which returns the milliseconds it measured: host
/// clock or device events) `warmup` times untimed, then `repetitions` times.
Timing measure(int warmup, int repetitions, const std::function<double()>& run_once_ms);

/// Host-clock milliseconds of `work`, synchronizing `exec` before and after.
double host_timed_ms(const kernels::Executor& exec, const std::function<void()>& work);

struct BenchRow {
    std::string section;   // "spmv", "solve", "batch", ...
    std::string problem;   // e.g. "paper_large"
    std::string variant;   // e.g. "A x, CSR stored"
    std::string device;    // device name
    Timing timing;
    std::string note;      // e.g. final relative residual
};

class BenchTable {
public:
    /// Adds a row after the last one of its section and problem (at the end
    /// where it is the first), so that the tables print and store grouped
    /// whatever order their rows were measured in.
    void add(BenchRow row);
    /// Rows of `section` get a ratio column: median / median of the row
    /// named `variant` for the same problem (lower is faster).
    void set_baseline(const std::string& section, const std::string& variant);
    /// Machine description printed above the tables and stored in JSON.
    void set_machine(nlohmann::json machine) { machine_ = std::move(machine); }

    const std::vector<BenchRow>& rows() const { return rows_; }
    /// The ratio of a row to its section's baseline, when there is one.
    std::optional<double> ratio(const BenchRow& row) const;
    /// The row with this section, problem and variant (nullptr if absent).
    const BenchRow* find(const std::string& section, const std::string& problem,
                         const std::string& variant) const;

    void print(std::ostream& out) const;
    nlohmann::json to_json() const;

private:
    std::vector<BenchRow> rows_;
    std::vector<std::pair<std::string, std::string>> baselines_;  // section -> variant
    nlohmann::json machine_ = nlohmann::json::object();
};

/// One of the founding paper's synthetic matrices, on the fly and
/// materialized (CSR and sliced ELL), with random x (n), y (m), and
/// b = A x_true (m) drawn from fixed seeds.
struct BenchProblem {
    std::string name;  // "paper_large" or "paper_small"
    std::unique_ptr<recon::Synthetic> on_the_fly;
    std::unique_ptr<recon::StoredMatrix> csr;
    std::unique_ptr<recon::StoredMatrix> sliced_ell;
    std::unique_ptr<recon::StoredMatrix> sliced_ell_by_column;  // entries in column order
    std::vector<float> x, y, b;

    std::string describe() const;  // "320000 x 3000, 1800000 nonzeros"
};

/// `which` as paper_matrix_name takes it (and throws as it does).
BenchProblem make_bench_problem(const std::string& which);

/// ‖A x − b‖ / ‖b‖ in double on the host (the note on solve rows: every
/// variant solves the same problem to a comparable residual).
double relative_residual(const recon::CsrMatrix& a, const std::vector<float>& x,
                         const std::vector<float>& b);

/// CPU rows: A x, Aᵀ y and Aᵀ(A d) per variant (on the fly, CSR, sliced
/// ELL) on `exec`, and the 400-iteration CGNR solve on each.
void add_operator_rows(BenchTable& table, const BenchProblem& problem,
                       const kernels::Executor& exec, const BenchConfig& config);
void add_solve_rows(BenchTable& table, const BenchProblem& problem,
                    const kernels::Executor& exec, const BenchConfig& config);
/// Variant name of the Eigen row (the baseline of the CPU "solve" section).
inline constexpr const char* eigen_solve_variant = "cpu Eigen LSCG (diagonal precond.), CSR";

/// Eigen's LeastSquaresConjugateGradient on the same CSR matrix and b.
void add_eigen_rows(BenchTable& table, const BenchProblem& problem, const BenchConfig& config);

/// The output stage: one frame's image and record written to an HDF5
/// output (Hdf5OutputWriter, a file in the temporary directory) for images
/// of 128², 256² and 512² pixels.
void add_output_rows(BenchTable& table, const BenchConfig& config);

/// The machine: CPU model, cores, OpenMP threads (and GPU name when used).
nlohmann::json describe_machine(const kernels::Executor& exec);

}  // namespace recon::pipeline
