// `recon bench` rows that run on any executor through the generic solver
// (on the CPU: our CPU path), and the Eigen reference.

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <Eigen/IterativeLinearSolvers>
#include <Eigen/SparseCore>
#include <omp.h>

#include "kernels/memory.hpp"
#include "kernels/primitives.hpp"
#include "pipeline/bench.hpp"
#include "recon/cgnr.hpp"

namespace recon::pipeline {

namespace {

std::vector<float> random_vector(std::size_t size, std::uint32_t seed)
{
    std::mt19937 rng{seed};
    std::uniform_real_distribution<float> uniform{-1.0f, 1.0f};
    std::vector<float> v(size);
    for (auto& e : v) e = uniform(rng);
    return v;
}

std::string backend_label(const kernels::Executor& exec)
{
    return exec.is_cpu() ? "cpu" : "cuda";
}

std::string residual_note(double residual)
{
    std::ostringstream note;
    note.precision(3);
    note << "|Ax-b|/|b| " << residual;
    return note.str();
}

struct Variant {
    std::string name;
    const recon::SystemModel* model;
};

std::vector<Variant> variants(const BenchProblem& p)
{
    return {{"on the fly", p.on_the_fly.get()},
            {"CSR stored", p.csr.get()},
            {"sliced ELL stored", p.sliced_ell.get()}};
}

}  // namespace

double relative_residual(const recon::CsrMatrix& a, const std::vector<float>& x,
                         const std::vector<float>& b)
{
    double rr = 0.0, bb = 0.0;
    for (kernels::index_t i = 0; i < a.rows; ++i) {
        double ax = 0.0;
        for (auto k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
            ax += static_cast<double>(a.values[k]) * x[a.col_idx[k]];
        }
        rr += (ax - b[i]) * (ax - b[i]);
        bb += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(rr / bb);
}

std::string BenchProblem::describe() const
{
    return std::to_string(on_the_fly->rows()) + " x " + std::to_string(on_the_fly->cols()) +
           ", " + std::to_string(on_the_fly->nnz()) + " nonzeros";
}

BenchProblem make_bench_problem(const std::string& which)
{
    BenchProblem p;
    p.name = paper_matrix_name(which);
    p.on_the_fly = std::make_unique<recon::Synthetic>(p.name == "paper_large"
                                                          ? recon::Synthetic::paper_large()
                                                          : recon::Synthetic::paper_small());
    recon::CsrMatrix csr = p.on_the_fly->materialize();
    p.sliced_ell = std::make_unique<recon::StoredMatrix>(csr, recon::MatrixLayout::sliced_ell,
                                                         p.name);
    p.sliced_ell_by_column = std::make_unique<recon::StoredMatrix>(
        csr, recon::MatrixLayout::sliced_ell, p.name, recon::ImageShape{},
        recon::EntryOrder::by_column);
    p.csr = std::make_unique<recon::StoredMatrix>(std::move(csr), recon::MatrixLayout::csr,
                                                  p.name);
    const auto m = static_cast<std::size_t>(p.csr->rows());
    const auto n = static_cast<std::size_t>(p.csr->cols());
    p.x = random_vector(n, 11);
    p.y = random_vector(m, 12);
    const auto x_true = random_vector(n, 13);
    p.b.resize(m);
    p.csr->apply(kernels::Executor::cpu(), {x_true.data(), static_cast<kernels::size_type>(n)},
                 {p.b.data(), static_cast<kernels::size_type>(m)});
    return p;
}

void add_operator_rows(BenchTable& table, const BenchProblem& p, const kernels::Executor& exec,
                       const BenchConfig& config)
{
    const std::string device = kernels::device_name(exec);
    kernels::Array<float> x{exec, p.x}, y{exec, p.y};
    kernels::Array<float> ax{exec, static_cast<kernels::size_type>(p.y.size())};
    kernels::Array<float> aty{exec, static_cast<kernels::size_type>(p.x.size())};
    // One product takes about a millisecond: more runs give a steadier median.
    const int runs = std::max(20, config.repetitions);
    for (const auto& v : variants(p)) {
        const std::string label = backend_label(exec) + " " + v.name;
        table.add({"operators", p.name, label + ": A x", device, measure(1, runs, [&] {
                       return host_timed_ms(exec, [&] {
                           v.model->apply(exec, std::as_const(x).view(), ax.view());
                       });
                   }), ""});
        table.add({"operators", p.name, label + ": At y", device, measure(1, runs, [&] {
                       return host_timed_ms(exec, [&] {
                           v.model->apply_adjoint(exec, std::as_const(y).view(), aty.view());
                       });
                   }), ""});
        table.add({"operators", p.name, label + ": At(A d) fused", device,
                   measure(1, runs, [&] {
                       return host_timed_ms(exec, [&] {
                           v.model->normal_apply(exec, std::as_const(x).view(), aty.view());
                       });
                   }),
                   ""});
    }
}

void add_solve_rows(BenchTable& table, const BenchProblem& p, const kernels::Executor& exec,
                    const BenchConfig& config)
{
    const std::string device = kernels::device_name(exec);
    const auto n = static_cast<kernels::size_type>(p.x.size());
    const auto m = static_cast<kernels::size_type>(p.b.size());
    const recon::CsrMatrix& csr = p.csr->csr();

    struct SolveVariant {
        std::string name;
        const recon::SystemModel* model;
        recon::CgnrForm form;
    };
    std::vector<SolveVariant> list;
    for (const auto& v : variants(p)) list.push_back({"CGNR fused, " + v.name, v.model,
                                                      recon::CgnrForm::fused});
    list.push_back({"CGLS1, CSR stored", p.csr.get(), recon::CgnrForm::cgls1});

    for (const auto& v : list) {
        recon::SolverOptions options;
        options.max_iterations = config.iterations;
        options.tolerance = 0.0;
        options.form = v.form;
        recon::CgnrSolver solver{*v.model, recon::Regularizer{}, options, exec};
        const Timing timing = measure(1, config.repetitions, [&] {
            kernels::copy(exec, solver.input(), kernels::Executor::cpu(),
                          kernels::View<const float>{p.b.data(), m});
            return host_timed_ms(exec, [&] { solver.solve(recon::InitialImage::zero); });
        });
        const auto result = solver.results().front();
        std::vector<float> image(static_cast<std::size_t>(n));
        kernels::copy(kernels::Executor::cpu(), kernels::View<float>{image.data(), n}, exec,
                      kernels::View<const float>{solver.image().data, n});
        exec.synchronize();
        table.add({"solve", p.name, backend_label(exec) + " ours " + v.name, device, timing,
                   residual_note(relative_residual(csr, image, p.b)) + ", " +
                       std::to_string(result.iterations) + " it"});
    }
}

void add_eigen_rows(BenchTable& table, const BenchProblem& p, const BenchConfig& config)
{
    using SparseMatrix = Eigen::SparseMatrix<float, Eigen::RowMajor, int>;
    const recon::CsrMatrix& csr = p.csr->csr();
    std::vector<int> outer(csr.row_ptr.begin(), csr.row_ptr.end());
    const SparseMatrix a = Eigen::Map<const SparseMatrix>(
        csr.rows, csr.cols, static_cast<int>(csr.nnz()), outer.data(), csr.col_idx.data(),
        csr.values.data());
    const Eigen::Map<const Eigen::VectorXf> b(p.b.data(), static_cast<Eigen::Index>(p.b.size()));

    Eigen::LeastSquaresConjugateGradient<SparseMatrix> lscg;
    lscg.setMaxIterations(config.iterations);
    lscg.setTolerance(0.0f);  // run every iteration, as ours does
    lscg.compute(a);          // the diagonal preconditioner: set-up, not timed
    Eigen::VectorXf x;
    const Timing timing = measure(1, config.repetitions, [&] {
        return host_timed_ms(kernels::Executor::cpu(), [&] { x = lscg.solve(b); });
    });
    const std::vector<float> image(x.data(), x.data() + x.size());
    table.add({"solve", p.name, eigen_solve_variant, "cpu", timing,
               residual_note(relative_residual(csr, image, p.b)) + ", " +
                   std::to_string(lscg.iterations()) + " it, " +
                   std::to_string(Eigen::nbThreads()) + " threads"});
}

nlohmann::json describe_machine(const kernels::Executor& exec)
{
    std::string cpu_model = "unknown";
    std::ifstream cpuinfo{"/proc/cpuinfo"};
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) == 0) {
            cpu_model = line.substr(line.find(':') + 2);
            break;
        }
    }
    nlohmann::json j{{"cpu", cpu_model},
                     {"cores", std::thread::hardware_concurrency()},
                     {"omp_threads", omp_get_max_threads()}};
    if (!exec.is_cpu()) j["gpu"] = kernels::device_name(exec);
    return j;
}

}  // namespace recon::pipeline
