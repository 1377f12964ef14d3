#pragma once
// SIGINT/SIGTERM as a flag for the live-stream commands: while a
// StopSignals lives, the signals set a flag that loops poll (a blocking
// ZeroMQ call returns early with EINTR); the old handlers come back after.

#include <csignal>

namespace recon::pipeline {

class StopSignals {
public:
    StopSignals();
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

    /// The signal received (SIGINT or SIGTERM), or 0.
    static int raised();

private:
    struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace recon::pipeline
