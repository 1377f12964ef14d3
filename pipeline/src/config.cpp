#include "pipeline/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace recon::pipeline {

namespace {

std::string section_of(const std::string& name)
{
    const auto dot = name.find('.');
    return dot == std::string::npos ? std::string{} : name.substr(0, dot);
}

std::string key_of(const std::string& name)
{
    const auto dot = name.find('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string format_double(double value)
{
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return ec == std::errc{} ? std::string(buffer, end) : std::to_string(value);
}

/// An option's value as INI text (bools as true/false, doubles shortest).
std::string ini_value(const boost::any& value)
{
    if (const auto* v = boost::any_cast<std::string>(&value)) return *v;
    if (const auto* v = boost::any_cast<bool>(&value)) return *v ? "true" : "false";
    if (const auto* v = boost::any_cast<double>(&value)) return format_double(*v);
    if (const auto* v = boost::any_cast<int>(&value)) return std::to_string(*v);
    if (const auto* v = boost::any_cast<std::int64_t>(&value)) return std::to_string(*v);
    if (const auto* v = boost::any_cast<std::uint64_t>(&value)) return std::to_string(*v);
    return "?";
}

bool looks_like_negative_number(const std::string& token)
{
    return token.size() >= 2 && token[0] == '-' &&
           (std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');
}

[[noreturn]] void bad_option(const std::string& option, const std::string& expected,
                             const std::string& found)
{
    throw std::invalid_argument{option + ": expected " + expected + ", found " + found};
}

}  // namespace

// --- sections -----------------------------------------------------------

recon::SystemSpec SystemConfig::resolved() const
{
    recon::SystemSpec out = spec;
    try {
        out.layout = recon::parse_matrix_layout(layout == "auto" ? "automatic" : layout);
    } catch (const std::exception&) {
        bad_option("system.layout", "csr, sliced_ell or auto", "'" + layout + "'");
    }
    return out;
}

recon::SolverOptions SolverConfig::options() const
{
    if (iterations <= 0) {
        bad_option("solver.iterations", "a positive number of iterations",
                   std::to_string(iterations));
    }
    if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
        bad_option("solver.tolerance", "a finite value >= 0", format_double(tolerance));
    }
    if (residual_replacement < 0) {
        bad_option("solver.residual_replacement", "an interval >= 0 (0: never)",
                   std::to_string(residual_replacement));
    }
    recon::SolverOptions options;
    options.max_iterations = iterations;
    options.tolerance = tolerance;
    try {
        options.form = recon::parse_cgnr_form(form);
    } catch (const std::exception&) {
        bad_option("solver.form", "fused or cgls1", "'" + form + "'");
    }
    options.residual_replacement = residual_replacement;
    try {
        options.launch = recon::parse_solve_launch(launch);
    } catch (const std::exception&) {
        bad_option("solver.launch", "auto, host_loop, graph or persistent", "'" + launch + "'");
    }
    if (status_check_interval < 1) {
        bad_option("solver.status_check_interval", "at least 1",
                   std::to_string(status_check_interval));
    }
    options.status_check_interval = status_check_interval;
    if (graph_unroll < 1) bad_option("solver.graph_unroll", "at least 1", std::to_string(graph_unroll));
    options.graph_unroll = graph_unroll;
    options.validate();
    return options;
}

recon::Regularizer SolverConfig::make_regularizer() const
{
    if (!(tv_epsilon > 0.0) || !std::isfinite(tv_epsilon)) {
        bad_option("solver.tv_epsilon", "a finite value > 0", format_double(tv_epsilon));
    }
    try {
        return recon::Regularizer::parse(regularizer, tv_epsilon);
    } catch (const std::exception& e) {
        throw std::invalid_argument{"solver.regularizer '" + regularizer + "': " + e.what()};
    }
}

void PipelineConfig::validate() const
{
    if (device != "cpu" && device != "cuda" && device != "auto") {
        bad_option("pipeline.device", "cpu, cuda or auto", "'" + device + "'");
    }
    if (!(budget_ms > 0.0) || !std::isfinite(budget_ms)) {
        bad_option("pipeline.budget_ms", "a latency budget > 0 ms", format_double(budget_ms));
    }
    if (timing != "fast" && timing != "recorded") {
        bad_option("pipeline.timing", "fast or recorded", "'" + timing + "'");
    }
    if (workers < 1) bad_option("pipeline.workers", "at least 1", std::to_string(workers));
    if (queue_capacity < 1) {
        bad_option("pipeline.queue_capacity", "at least 1", std::to_string(queue_capacity));
    }
    if (drop_policy != "block" && drop_policy != "drop_oldest" && drop_policy != "drop_newest") {
        bad_option("pipeline.drop_policy", "block, drop_oldest or drop_newest",
                   "'" + drop_policy + "'");
    }
    if (threads < 0) bad_option("pipeline.threads", "a count >= 0", std::to_string(threads));
}

void SimulateConfig::validate() const
{
    if (output.empty()) bad_option("simulate.output", "a file name", "nothing");
    if (sensors < 1) bad_option("simulate.sensors", "at least 1", std::to_string(sensors));
    if (frames < 1) bad_option("simulate.frames", "at least 1", std::to_string(frames));
    if (!(rate_hz > 0.0) || !std::isfinite(rate_hz)) {
        bad_option("simulate.rate_hz", "a frame rate > 0", format_double(rate_hz));
    }
    if (phantom != "shepp_logan" && phantom != "random_ellipses") {
        bad_option("simulate.phantom", "shepp_logan or random_ellipses", "'" + phantom + "'");
    }
    if (ellipses < 1) bad_option("simulate.ellipses", "at least 1", std::to_string(ellipses));
    if (!(max_line_integral >= 0.0) || !std::isfinite(max_line_integral)) {
        bad_option("simulate.max_line_integral", "a value >= 0 (0: unscaled)",
                   format_double(max_line_integral));
    }
    if (!(motion >= 0.0) || !std::isfinite(motion)) {
        bad_option("simulate.motion", "an amplitude >= 0", format_double(motion));
    }
    if (noise != "none" && noise != "gaussian" && noise != "poisson") {
        bad_option("simulate.noise", "none, gaussian or poisson", "'" + noise + "'");
    }
    if (!(sigma >= 0.0) || !std::isfinite(sigma)) {
        bad_option("simulate.sigma", "a noise level >= 0", format_double(sigma));
    }
    if (!(photons > 0.0) || !std::isfinite(photons)) {
        bad_option("simulate.photons", "a photon count > 0", format_double(photons));
    }
    if (dtype != "float32" && dtype != "uint16" && dtype != "uint32") {
        bad_option("simulate.dtype", "float32, uint16 or uint32", "'" + dtype + "'");
    }
}

std::vector<std::string> comma_list(const std::string& text)
{
    std::vector<std::string> out;
    std::stringstream stream{text};
    for (std::string item; std::getline(stream, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

namespace {

const std::vector<std::string> bench_tables{"operators", "solve", "batch", "ct", "output"};

}  // namespace

std::string paper_matrix_name(const std::string& which)
{
    if (which == "large" || which == "paper_large") return "paper_large";
    if (which == "small" || which == "paper_small") return "paper_small";
    bad_option("bench.matrices", "large or small", "'" + which + "'");
}

bool BenchConfig::wants(const std::string& table) const
{
    if (tables == "all") return true;
    const auto listed = comma_list(tables);
    return std::find(listed.begin(), listed.end(), table) != listed.end();
}

void BenchConfig::validate() const
{
    const auto paper = comma_list(matrices);
    if (paper.empty()) bad_option("bench.matrices", "large, small or both", "''");
    for (const auto& m : paper) paper_matrix_name(m);
    if (tables != "all") {
        const auto listed = comma_list(tables);
        const char* expected = "all or a comma list of operators, solve, batch, ct, output";
        if (listed.empty()) bad_option("bench.tables", expected, "'" + tables + "'");
        for (const auto& t : listed) {
            if (std::find(bench_tables.begin(), bench_tables.end(), t) == bench_tables.end()) {
                bad_option("bench.tables", expected, "'" + t + "'");
            }
        }
    }
    if (repetitions < 1) {
        bad_option("bench.repetitions", "at least 1", std::to_string(repetitions));
    }
    if (iterations < 1) {
        bad_option("bench.iterations", "a positive number of iterations",
                   std::to_string(iterations));
    }
}

namespace {

std::string in_dir(const std::string& dir, const std::string& explicit_path,
                   const char* name)
{
    if (!explicit_path.empty()) return explicit_path;
    return dir.empty() ? std::string{name} : dir + "/" + name;
}

}  // namespace

std::string OutputConfig::file_path() const { return in_dir(dir, file, "reconstruction.h5"); }
std::string OutputConfig::report_path() const { return in_dir(dir, report, "frames.jsonl"); }
std::string OutputConfig::summary_path() const { return in_dir(dir, summary, "summary.json"); }
std::string OutputConfig::plot_path() const { return in_dir(dir, plot, "latency.svg"); }

// --- descriptions -------------------------------------------------------

namespace {

template <class T>
po::typed_value<T>* bound(T* field)
{
    return po::value<T>(field)->default_value(*field);
}

// Boost prints a default string value with quotes only when told; this keeps
// help output readable for strings.
po::typed_value<std::string>* bound_text(std::string* field)
{
    return po::value<std::string>(field)->default_value(*field, "\"" + *field + "\"");
}

}  // namespace

po::options_description system_options(SystemConfig& c)
{
    auto& s = c.spec;
    po::options_description d{"[system] system model"};
    d.add_options()
        ("system.geometry", bound_text(&s.geometry), "matrix | parallel2d | synthetic")
        ("system.nx", bound(&s.nx), "parallel2d: image width (pixels)")
        ("system.ny", bound(&s.ny), "parallel2d: image height (pixels)")
        ("system.bins", bound(&s.bins), "parallel2d: detector bins (0: nx)")
        ("system.views", bound(&s.views), "parallel2d: projection angles")
        ("system.angle_range_deg", bound(&s.angle_range_deg),
         "parallel2d: angles k * range / views (degrees)")
        ("system.center_offset", bound(&s.center_offset),
         "parallel2d: centre-of-rotation offset (bins)")
        ("system.rows", bound(&s.rows), "synthetic: rows m")
        ("system.cols", bound(&s.cols), "synthetic: columns n")
        ("system.nnz", bound(&s.nnz), "synthetic: nonzeros")
        ("system.seed", bound(&s.seed), "synthetic: seed of the row hash")
        ("system.matrix_file", bound_text(&s.matrix_file), "matrix: HDF5 or .mtx file")
        ("system.matrix_group", bound_text(&s.matrix_group), "matrix: HDF5 group")
        ("system.materialize", bound(&s.materialize),
         "store the model as a sparse matrix instead of generating rows")
        ("system.layout", bound_text(&c.layout), "stored matrix layout: csr | sliced_ell | auto");
    return d;
}

po::options_description solver_options(SolverConfig& c)
{
    po::options_description d{"[solver] CGNR"};
    d.add_options()
        ("solver.iterations", bound(&c.iterations), "maximum iterations per frame (> 0)")
        ("solver.tolerance", bound(&c.tolerance), "stop at |g| <= tol |A^T b| (0: only at g = 0)")
        ("solver.form", bound_text(&c.form), "fused | cgls1")
        ("solver.residual_replacement", bound(&c.residual_replacement),
         "fused form: recompute h = A^T(Ax - b) every K iterations (0: never)")
        ("solver.launch", bound_text(&c.launch), "CUDA: auto | host_loop | graph | persistent")
        ("solver.status_check_interval", bound(&c.status_check_interval),
         "host loop: read the stop flags every this many iterations")
        ("solver.graph_unroll", bound(&c.graph_unroll),
         "graph: iterations per turn of the conditional loop")
        ("solver.regularizer", bound_text(&c.regularizer),
         "none, or name:weight,... with tikhonov, laplacian, tv, nonneg, nonpos")
        ("solver.tv_epsilon", bound(&c.tv_epsilon), "TV smoothing epsilon");
    return d;
}

po::options_description pipeline_options(PipelineConfig& c)
{
    po::options_description d{"[pipeline] frame flow"};
    d.add_options()
        ("pipeline.device", bound_text(&c.device), "cpu | cuda | auto")
        ("pipeline.budget_ms", bound(&c.budget_ms), "latency budget per frame (ms)")
        ("pipeline.warm_start", bound(&c.warm_start),
         "start each frame from the previous image of its sensor")
        ("pipeline.timing", bound_text(&c.timing), "replay: fast | recorded")
        ("pipeline.workers", bound(&c.workers), "solver workers")
        ("pipeline.queue_capacity", bound(&c.queue_capacity), "frames waiting for a worker")
        ("pipeline.drop_policy", bound_text(&c.drop_policy),
         "when the queue is full: block | drop_oldest | drop_newest")
        ("pipeline.threads", bound(&c.threads), "CPU threads per solve (0: all cores)");
    return d;
}

po::options_description simulate_options(SimulateConfig& c)
{
    po::options_description d{"[simulate] recording"};
    d.add_options()
        ("simulate.output", bound_text(&c.output), "recording file to write")
        ("simulate.sensors", bound(&c.sensors), "number of sensors")
        ("simulate.frames", bound(&c.frames), "frames per sensor")
        ("simulate.rate_hz", bound(&c.rate_hz), "frame rate per sensor (timestamps)")
        ("simulate.phantom", bound_text(&c.phantom), "shepp_logan | random_ellipses")
        ("simulate.ellipses", bound(&c.ellipses), "random_ellipses: how many")
        ("simulate.max_line_integral", bound(&c.max_line_integral),
         "> 0: scale the phantom so that its largest line integral is this")
        ("simulate.motion", bound(&c.motion), "per-frame motion amplitude (phantom radii)")
        ("simulate.noise", bound_text(&c.noise), "none | gaussian | poisson")
        ("simulate.sigma", bound(&c.sigma), "gaussian: std. dev. relative to the largest value")
        ("simulate.photons", bound(&c.photons),
         "poisson / raw counts: incident photons per detector cell")
        ("simulate.dtype", bound_text(&c.dtype), "float32 | uint16 | uint32 (raw counts)")
        ("simulate.seed", bound(&c.seed), "random seed")
        ("simulate.ground_truth", bound(&c.ground_truth), "store the phantom images");
    return d;
}

po::options_description output_options(OutputConfig& c)
{
    po::options_description d{"[output] results"};
    d.add_options()
        ("output.dir", bound_text(&c.dir), "folder for the files below")
        ("output.file", bound_text(&c.file), "HDF5 reconstructions (dir/reconstruction.h5)")
        ("output.report", bound_text(&c.report), "JSON Lines per frame (dir/frames.jsonl)")
        ("output.summary", bound_text(&c.summary), "summary JSON (dir/summary.json)")
        ("output.plot", bound_text(&c.plot), "latency plot SVG (dir/latency.svg)");
    return d;
}

po::options_description bench_options(BenchConfig& c)
{
    po::options_description d{"[bench] measurement"};
    d.add_options()
        ("bench.repetitions", bound(&c.repetitions), "timed runs after one warm-up")
        ("bench.iterations", bound(&c.iterations), "CGNR iterations per solve")
        ("bench.matrices", bound_text(&c.matrices), "paper matrices: large, small or both")
        ("bench.json", bound_text(&c.json), "write the tables as JSON to this file")
        ("bench.eigen", bound(&c.eigen), "include Eigen's LeastSquaresConjugateGradient")
        ("bench.tables", bound_text(&c.tables),
         "all, or a comma list of operators, solve, batch, ct (GPU) and output");
    return d;
}

// --- loader ---------------------------------------------------------------

ConfigLoader::ConfigLoader(std::string command, std::string summary)
    : command_{std::move(command)}, all_{"recon " + command_ + ": " + summary}
{
    po::options_description general{"general"};
    general.add_options()
        ("help,h", "show the options")
        ("config,c", po::value<std::string>(&config_file_), "read options from an INI file");
    all_.add(general);
}

void ConfigLoader::add(const po::options_description& section, bool whole)
{
    if (whole && !section.options().empty()) {
        whole_sections_.push_back(section_of(section.options().front()->long_name()));
    }
    sections_.push_back(section);
    all_.add(section);
}

void ConfigLoader::add_alias(const std::string& alias, const std::string& option)
{
    aliases_[alias] = option;
}

void ConfigLoader::add_positional(const std::string& option, int max_count)
{
    positional_.add(option.c_str(), max_count);
}

Args ConfigLoader::expand_aliases(const Args& args) const
{
    Args out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string token = args[i];
        if (token.rfind("--", 0) == 0) {
            const auto eq = token.find('=');
            const std::string name = token.substr(0, eq);
            if (const auto it = aliases_.find(name); it != aliases_.end()) {
                token = "--" + it->second + (eq == std::string::npos ? "" : token.substr(eq));
            }
            // "--opt -3": join, or Boost would read "-3" as a short option.
            if (eq == std::string::npos && i + 1 < args.size() &&
                looks_like_negative_number(args[i + 1])) {
                token += "=" + args[++i];
            }
        }
        out.push_back(token);
    }
    return out;
}

bool ConfigLoader::parse(const Args& args, std::ostream& out)
{
    po::variables_map values;
    try {
        po::store(po::command_line_parser(expand_aliases(args))
                      .options(all_)
                      .positional(positional_)
                      .run(),
                  values);
    } catch (const po::error& e) {
        throw std::invalid_argument{std::string{"command line: "} + e.what()};
    }
    if (values.count("help") != 0U) {
        out << all_ << "\n";
        return false;
    }
    if (values.count("config") != 0U) {
        config_file_ = values["config"].as<std::string>();
        std::ifstream file{config_file_};
        if (!file) {
            throw std::invalid_argument{"config file '" + config_file_ +
                                        "': cannot be opened (expected a readable INI file)"};
        }
        try {
            // Values already stored from the command line take precedence.
            auto parsed = po::parse_config_file(file, all_, /*allow_unregistered=*/true);
            for (const auto& option : parsed.options) {
                if (!option.unregistered) continue;
                const std::string section = section_of(option.string_key);
                const auto& known = known_sections();
                const bool ours = std::find(whole_sections_.begin(), whole_sections_.end(),
                                            section) != whole_sections_.end();
                if (ours || std::find(known.begin(), known.end(), section) == known.end()) {
                    throw po::unknown_option{option.string_key};
                }
            }
            po::store(parsed, values);
        } catch (const po::error& e) {
            throw std::invalid_argument{"config file '" + config_file_ + "': " + e.what()};
        }
    }
    try {
        po::notify(values);
    } catch (const po::error& e) {
        throw std::invalid_argument{std::string{"options: "} + e.what()};
    }
    values_ = std::move(values);
    return true;
}

const std::vector<std::string>& ConfigLoader::known_sections()
{
    static const std::vector<std::string> sections{"system",   "solver", "pipeline", "simulate",
                                                   "output",   "bench",  "daemon"};
    return sections;
}

std::string ConfigLoader::effective_text() const
{
    std::ostringstream text;
    text << "# recon " << command_ << ": effective configuration\n";
    for (const auto& section : sections_) {
        std::string current;
        for (const auto& option : section.options()) {
            const std::string& name = option->long_name();
            const auto found = values_.find(name);
            if (found == values_.end() || found->second.empty()) continue;
            const std::string group = section_of(name);
            // Options without a section (a command's own, added first) go
            // above every [section] header, where INI files keep them.
            if (group != current && !group.empty()) {
                text << "\n[" << group << "]\n";
                current = group;
            }
            text << key_of(name) << " = " << ini_value(found->second.value()) << "\n";
        }
    }
    return text.str();
}

}  // namespace recon::pipeline
