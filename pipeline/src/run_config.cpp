#include "pipeline/run_config.hpp"

namespace recon::pipeline {

void add_run_options(ConfigLoader& loader, RunConfig& config, bool with_input)
{
    if (with_input) {
        po::options_description input{"input"};
        input.add_options()("input,i", po::value(&config.input),
                            "recording to replay (HDF5: ours or NXtomo)");
        loader.add(input);
        loader.add_positional("input");
    }
    loader.add(system_options(config.system));
    loader.add(solver_options(config.solver));
    loader.add(pipeline_options(config.pipeline));
    loader.add(simulate_options(config.simulate));
    loader.add(output_options(config.output));
    loader.add_alias("--device", "pipeline.device");
    loader.add_alias("--budget", "pipeline.budget_ms");
    loader.add_alias("--timing", "pipeline.timing");
    loader.add_alias("--workers", "pipeline.workers");
    loader.add_alias("--threads", "pipeline.threads");
    loader.add_alias("--iterations", "solver.iterations");
    loader.add_alias("--regularizer", "solver.regularizer");
    loader.add_alias("--geometry", "system.geometry");
    loader.add_alias("--frames", "simulate.frames");
    loader.add_alias("--sensors", "simulate.sensors");
}

sensors::SimulationConfig simulation_config(const RunConfig& config)
{
    const SimulateConfig& sim = config.simulate;
    sim.validate();
    sensors::SimulatedSensor sensor;
    sensor.system = config.system.resolved();
    sensor.phantom.kind = sensors::parse_phantom_kind(sim.phantom);
    sensor.phantom.ellipses = sim.ellipses;
    sensor.phantom.max_line_integral = sim.max_line_integral;
    sensor.phantom.shift = sim.motion;
    sensor.noise.kind = sensors::parse_noise_kind(sim.noise);
    sensor.noise.sigma = sim.sigma;
    sensor.noise.photons = sim.photons;
    sensor.dtype = sim.dtype;
    auto out = sensors::SimulationConfig::uniform(sim.sensors, sensor, sim.frames, sim.rate_hz,
                                                  sim.seed);
    out.ground_truth = sim.ground_truth;
    return out;
}

}  // namespace recon::pipeline
