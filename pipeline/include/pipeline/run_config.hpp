#pragma once
// The configuration shared by simulate and replay: every section, so that
// one INI file (configs/*.ini) describes a whole scenario and each command
// takes what it needs from it.

#include <string>

#include "pipeline/config.hpp"
#include "sensors/simulator.hpp"

namespace recon::pipeline {

struct RunConfig {
    std::string input;  // replay: the recording
    SystemConfig system;
    SolverConfig solver;
    PipelineConfig pipeline;
    SimulateConfig simulate;
    OutputConfig output;
};

/// Registers every section of `config` with `loader`, the short aliases
/// (--device, --iterations, --regularizer, --budget, --timing, --frames,
/// --sensors, --geometry) and, when `with_input`, the positional input.
void add_run_options(ConfigLoader& loader, RunConfig& config, bool with_input);

/// The simulation that [system] and [simulate] describe: simulate.sensors
/// copies of one sensor, simulate.frames frames each. Shared by `recon
/// simulate` and `recon simulate --serve`, so that a recording and a live
/// stream of one configuration carry the same data. Validates [simulate];
/// throws std::invalid_argument naming the option.
sensors::SimulationConfig simulation_config(const RunConfig& config);

}  // namespace recon::pipeline
