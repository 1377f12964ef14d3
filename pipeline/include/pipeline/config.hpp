#pragma once
// Configuration of the subcommands: one Boost.Program_options description per
// INI section ([system], [solver], [pipeline], [simulate], [output], [bench]).
// Options carry the same dotted names on the command line (--solver.iterations
// 400) and in INI files (iterations = 400 under [solver]); a few short aliases
// (--device, --iterations, ...) are rewritten to their dotted names first.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "pipeline/commands.hpp"
#include "recon/cgnr.hpp"
#include "recon/regularizer.hpp"
#include "recon/system_model.hpp"

namespace recon::pipeline {

namespace po = boost::program_options;

/// [system]: the system model of a simulation (replay takes the geometry
/// from the recording and only its materialize / layout choices from here).
struct SystemConfig {
    recon::SystemSpec spec;
    std::string layout = "auto";  // csr | sliced_ell | auto

    /// The spec with `layout` parsed; throws naming system.layout.
    recon::SystemSpec resolved() const;
};

/// [solver]: CGNR options and the regularizer.
struct SolverConfig {
    int iterations = 400;
    double tolerance = 0.0;
    std::string form = "fused";  // fused | cgls1
    int residual_replacement = 50;
    std::string launch = "auto";  // CUDA: auto | host_loop | graph | persistent
    int status_check_interval = 1;     // host loop: read the stop flags every this many
    int graph_unroll = 10;             // graph: iterations per turn of the loop
    std::string regularizer = "none";  // e.g. "tv:0.002,nonneg:10"
    double tv_epsilon = 1e-3;

    /// The solver options; throws std::invalid_argument naming the option
    /// (solver.iterations must be > 0, solver.tolerance >= 0, ...).
    recon::SolverOptions options() const;
    /// The regularizer; errors are prefixed with "solver.regularizer".
    recon::Regularizer make_regularizer() const;
};

/// [pipeline]: how frames flow from a source to the sinks.
struct PipelineConfig {
    std::string device = "auto";  // cpu | cuda | auto
    double budget_ms = 440.0;     // per-frame latency budget (arrival to written)
    bool warm_start = true;       // start from the previous image of the same sensor
    std::string timing = "fast";  // replay: fast | recorded
    int workers = 1;              // solver threads, each with its own solvers
    int queue_capacity = 16;      // frames waiting for a worker
    std::string drop_policy = "block";  // block | drop_oldest | drop_newest
    int threads = 0;              // CPU threads per solve (0: OpenMP default)

    /// Throws std::invalid_argument naming the bad option.
    void validate() const;
};

/// [simulate]: what `recon simulate` writes (see sensors/simulator.hpp).
struct SimulateConfig {
    std::string output = "recording.h5";
    int sensors = 1;
    int frames = 4;                 // per sensor
    double rate_hz = 10.0;          // frame rate per sensor (timestamps)
    std::string phantom = "shepp_logan";  // shepp_logan | random_ellipses
    int ellipses = 8;               // random_ellipses: how many
    double max_line_integral = 0.0; // > 0: scale the phantom to this largest line integral
    double motion = 0.02;           // per-frame motion amplitude (phantom radius units)
    std::string noise = "none";     // none | gaussian | poisson
    double sigma = 0.01;            // gaussian: relative to the largest |line integral|
    double photons = 1e4;           // poisson / raw counts: incident photons per cell
    std::string dtype = "float32";  // float32 line integrals, or uint16 / uint32 raw counts
    std::uint64_t seed = 1;
    bool ground_truth = true;

    /// Throws std::invalid_argument naming the bad option.
    void validate() const;
};

/// [output]: where replay and daemon put their results. Paths left empty
/// default to fixed names inside `dir`.
struct OutputConfig {
    std::string dir = "recon-output";
    std::string file;     // HDF5 reconstructions (dir/reconstruction.h5)
    std::string report;   // JSON Lines, one record per frame (dir/frames.jsonl)
    std::string summary;  // summary JSON (dir/summary.json)
    std::string plot;     // latency SVG (dir/latency.svg)

    std::string file_path() const;
    std::string report_path() const;
    std::string summary_path() const;
    std::string plot_path() const;
};

/// [bench]: `recon bench` repetitions and problem sizes.
struct BenchConfig {
    int repetitions = 5;          // timed runs after one warm-up; medians reported
    int iterations = 400;         // CGNR iterations per solve
    std::string matrices = "large,small";  // paper matrices: large, small
    std::string json;             // write the table as JSON here when set
    bool eigen = true;            // include Eigen's LeastSquaresConjugateGradient
    /// Which tables: "all", or a comma list of operators, solve, batch (GPU),
    /// ct (GPU) and output.
    std::string tables = "all";

    void validate() const;
    /// Whether `table` (one of the names above) is to be measured.
    bool wants(const std::string& table) const;
};

/// The items of a comma-separated list, empty ones dropped ("a,,b" -> a, b).
std::vector<std::string> comma_list(const std::string& text);

/// The bench's name of the paper matrix that an item of bench.matrices
/// names: "paper_large" for "large" or "paper_large", "paper_small" for
/// "small" or "paper_small"; throws std::invalid_argument naming
/// bench.matrices otherwise.
std::string paper_matrix_name(const std::string& which);

po::options_description system_options(SystemConfig& config);
po::options_description solver_options(SolverConfig& config);
po::options_description pipeline_options(PipelineConfig& config);
po::options_description simulate_options(SimulateConfig& config);
po::options_description output_options(OutputConfig& config);
po::options_description bench_options(BenchConfig& config);

/// Parses a subcommand's arguments: command line first, then the INI file
/// named by --config (command-line values win), into the variables bound by
/// the added descriptions. Errors are std::invalid_argument with one line
/// naming the option or the file. An INI file may also carry sections that
/// only other commands read (known_sections()); they are skipped, so that
/// one file can describe a whole scenario. Unknown options of this command's
/// sections, and unknown sections, are errors.
class ConfigLoader {
public:
    /// `command` names the subcommand in help and errors.
    ConfigLoader(std::string command, std::string summary);

    /// Adds one section's description (kept for help, parsing and the
    /// effective-configuration text). Options named without a "section."
    /// prefix (a command's own, e.g. the input file) must be added first.
    /// `whole`: the description holds every option of its section, so an
    /// unknown key there is a typo; false for a command that reads only a
    /// few options of a shared section.
    void add(const po::options_description& section, bool whole = true);
    /// Rewrites `alias` (e.g. "--device") to `option` (e.g. "pipeline.device").
    void add_alias(const std::string& alias, const std::string& option);
    /// A positional argument bound to `option` (e.g. the recording path).
    void add_positional(const std::string& option, int max_count = 1);

    /// Parses; returns false when --help was asked for (help already written
    /// to `out`). Throws std::invalid_argument on any error.
    bool parse(const Args& args, std::ostream& out);

    const po::variables_map& values() const { return values_; }
    /// The INI file given with --config ("" when none).
    const std::string& config_file() const { return config_file_; }
    /// Every option of the added sections with its effective value, as INI
    /// text that --config reads back.
    std::string effective_text() const;

    /// Every section some command reads: system, solver, pipeline, simulate,
    /// output, bench, daemon.
    static const std::vector<std::string>& known_sections();

private:
    Args expand_aliases(const Args& args) const;

    std::string command_;
    po::options_description all_;
    std::vector<po::options_description> sections_;
    std::vector<std::string> whole_sections_;
    po::positional_options_description positional_;
    std::map<std::string, std::string> aliases_;
    po::variables_map values_;
    std::string config_file_;
};

}  // namespace recon::pipeline
