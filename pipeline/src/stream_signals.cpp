// SIGINT/SIGTERM to a flag (see stream_signals.hpp).

#include "pipeline/stream_signals.hpp"

#include <atomic>

namespace recon::pipeline {
namespace {

std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch lock-free atomics");

extern "C" void on_stop_signal(int signal) { stop_signal.store(signal); }

}  // namespace

StopSignals::StopSignals()
{
    stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
}

StopSignals::~StopSignals()
{
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::raised() { return stop_signal.load(); }

}  // namespace recon::pipeline
