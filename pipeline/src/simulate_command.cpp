// `recon simulate`: write a recording of simulated sensors (phantoms
// measured through the configured system model, with noise).

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "pipeline/commands.hpp"
#include "pipeline/run_config.hpp"
#include "sensors/simulator.hpp"

namespace recon::pipeline {

int simulate_command(const Args& args)
{
    RunConfig config;
    ConfigLoader loader{"simulate", "write a recording of simulated sensors"};
    add_run_options(loader, config, /*with_input=*/false);
    loader.add_alias("--output", "simulate.output");
    if (!loader.parse(args, std::cout)) return 0;
    const sensors::SimulationConfig simulation = simulation_config(config);
    const std::string& path = config.simulate.output;
    const auto parent = std::filesystem::path{path}.parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent)) {
        throw std::invalid_argument{"simulate.output '" + path +
                                    "': expected an existing folder, found no '" +
                                    parent.string() + "'"};
    }

    sensors::simulate_recording(path, simulation);

    const auto& spec = simulation.sensors.front().system;
    std::cout << "wrote " << path << ": " << simulation.sensors.size() << " sensors x "
              << simulation.frames << " frames, geometry " << spec.geometry;
    if (spec.geometry == "parallel2d") {
        std::cout << " " << spec.nx << " x " << spec.ny << ", " << spec.views << " views";
    } else if (spec.geometry == "synthetic") {
        std::cout << " " << spec.rows << " x " << spec.cols << ", " << spec.nnz << " nonzeros";
    }
    std::cout << ", " << simulation.sensors.front().dtype << ", noise " << config.simulate.noise
              << (simulation.ground_truth ? ", with ground truth" : "") << "\n";
    return 0;
}

}  // namespace recon::pipeline
