// recon: real-time iterative image reconstruction (one binary, subcommands).

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>

#include "pipeline/commands.hpp"

namespace {

constexpr const char* usage = R"(usage: recon <command> [options]

commands:
  simulate   make a recording from phantoms (--serve ENDPOINT: stream it live)
  replay     reconstruct every frame of an HDF5 recording (ours or NXtomo)
  daemon     reconstruct frames of a live DECTRIS Stream V2 (ZeroMQ) stream
  bench      performance tables (CPU, Eigen, GPU variants, cuSPARSE)

`recon <command> --help` lists a command's options; every option can also
be given in an INI file with --config FILE (see configs/).
)";

}  // namespace

int main(int argc, char** argv)
{
    using namespace recon::pipeline;
    if (argc < 2 || std::string{argv[1]} == "--help" || std::string{argv[1]} == "-h") {
        std::cout << usage;
        return argc < 2 ? 2 : 0;
    }
    const std::string command = argv[1];
    const Args args(argv + 2, argv + argc);
    try {
        if (command == "simulate") {
            const bool serve = std::any_of(args.begin(), args.end(), [](const std::string& a) {
                return a == "--serve" || a.rfind("--serve=", 0) == 0;
            });
            return serve ? serve_command(args) : simulate_command(args);
        }
        if (command == "replay") return replay_command(args);
        if (command == "daemon") return daemon_command(args);
        if (command == "bench") return bench_command(args);
        if (command == "--version") {
            std::cout << "recon 0.1.0\n";
            return 0;
        }
    } catch (const std::exception& e) {
        std::cerr << "recon " << command << ": error: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "recon: error: unknown command '" << command << "'\n" << usage;
    return 2;
}
