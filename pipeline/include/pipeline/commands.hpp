#pragma once
// The subcommands of the `recon` binary. Each takes the arguments after the
// subcommand name and returns the process exit code; errors are printed as
// one line on stderr ("recon <command>: error: ...").

#include <string>
#include <vector>

namespace recon::pipeline {

using Args = std::vector<std::string>;

int simulate_command(const Args& args);  // write a recording from phantoms
int serve_command(const Args& args);     // simulate --serve: a Stream V2 producer
int replay_command(const Args& args);    // reconstruct a recording
int daemon_command(const Args& args);    // reconstruct a live stream
int bench_command(const Args& args);     // the performance tables

}  // namespace recon::pipeline
