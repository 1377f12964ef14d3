// `recon bench`: the performance tables (DESIGN §8) for one device.

#include <fstream>
#include <iostream>
#include <stdexcept>

#include "pipeline/bench.hpp"
#include "pipeline/bench_cuda.hpp"
#include "pipeline/commands.hpp"
#include "pipeline/config.hpp"
#include "pipeline/device.hpp"

namespace recon::pipeline {

int bench_command(const Args& args)
{
    BenchConfig bench;
    PipelineConfig pipeline;
    ConfigLoader loader{"bench", "time our solver and its baselines on the paper matrices"};
    po::options_description device{"[pipeline] device"};
    device.add_options()
        ("pipeline.device", po::value(&pipeline.device)->default_value(pipeline.device),
         "cpu | cuda | auto")
        ("pipeline.threads", po::value(&pipeline.threads)->default_value(pipeline.threads),
         "CPU threads (0: all cores)");
    loader.add(bench_options(bench));
    loader.add(device, /*whole=*/false);
    loader.add_alias("--device", "pipeline.device");
    loader.add_alias("--threads", "pipeline.threads");
    loader.add_alias("--json", "bench.json");
    loader.add_alias("--repetitions", "bench.repetitions");
    loader.add_alias("--iterations", "bench.iterations");
    loader.add_alias("--matrices", "bench.matrices");
    loader.add_alias("--tables", "bench.tables");
    if (!loader.parse(args, std::cout)) return 0;
    bench.validate();
    pipeline.validate();
    set_cpu_threads(pipeline.threads);
    const kernels::Executor exec = select_device(pipeline.device);
    std::ofstream json_file;
    if (!bench.json.empty()) {
        json_file.open(bench.json);  // fail now, not after minutes of measuring
        if (!json_file) {
            throw std::runtime_error{"bench.json '" + bench.json + "': cannot be created"};
        }
    }

    BenchTable table;
    table.set_machine(describe_machine(exec));
    table.set_baseline("solve", eigen_solve_variant);
    // only the operator, solve and batch tables measure the paper matrices
    std::vector<BenchProblem> prepared;
    if (bench.wants("operators") || bench.wants("solve") || bench.wants("batch")) {
        for (const auto& which : comma_list(bench.matrices)) {
            prepared.push_back(make_bench_problem(which));
        }
    }
    if (exec.is_cpu()) {
        for (const auto& problem : prepared) {
            std::cerr << "bench: " << problem.name << " (" << problem.describe() << ")\n";
            if (bench.wants("operators")) add_operator_rows(table, problem, exec, bench);
            if (bench.wants("solve")) {
                add_solve_rows(table, problem, exec, bench);
                if (bench.eigen) add_eigen_rows(table, problem, bench);
            }
        }
    } else {
        // The GPU tables carry their own CPU reference row; Eigen stays in
        // the CPU "solve" section.
        std::vector<const BenchProblem*> pointers;
        for (const auto& problem : prepared) pointers.push_back(&problem);
        add_cuda_rows(table, pointers, exec, bench);
        if (bench.eigen && bench.wants("solve")) {
            for (const auto& problem : prepared) add_eigen_rows(table, problem, bench);
        }
    }
    if (bench.wants("output")) add_output_rows(table, bench);
    table.print(std::cout);
    if (json_file.is_open()) {
        json_file << table.to_json().dump(2) << "\n";
        if (!json_file) throw std::runtime_error{"bench.json '" + bench.json + "': write failed"};
        std::cout << "\nwrote " << bench.json << "\n";
    }
    return 0;
}

}  // namespace recon::pipeline
