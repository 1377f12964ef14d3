// Pinned host memory, streams and events of a build without CUDA: host
// memory is ordinary heap memory, CPU streams own nothing, CPU events are
// host time points; a CUDA executor gets the backend's "no CUDA" error.

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/events.hpp"
#include "kernels/host_memory.hpp"

#define RECON_UNAVAILABLE_MESSAGE \
    "this build has no CUDA backend (reconfigure with a CUDA compiler and RECON_WITH_CUDA=ON)"

namespace recon::kernels {

namespace {

constexpr std::size_t host_alignment = 64;

void require_cpu(const Executor& exec, const char* what)
{
    if (!exec.is_cpu()) {
        throw std::runtime_error{std::string{what} + ": " + RECON_UNAVAILABLE_MESSAGE};
    }
}

}  // namespace

namespace detail {

void* allocate_host(std::size_t bytes, bool& page_locked)
{
    page_locked = false;
    return ::operator new(bytes, std::align_val_t{host_alignment});
}

void deallocate_host(void* ptr, bool /*page_locked*/) noexcept
{
    ::operator delete(ptr, std::align_val_t{host_alignment});
}

}  // namespace detail

Stream::Stream(const Executor& exec) : exec_{exec.with_stream(nullptr)}
{
    require_cpu(exec, "Stream");
}
Stream::~Stream() { release(); }
Stream::Stream(Stream&& other) noexcept : exec_{other.exec_} {}
Stream& Stream::operator=(Stream&& other) noexcept
{
    exec_ = other.exec_;
    return *this;
}
void Stream::release() noexcept {}

Event::Event(const Executor& exec) : exec_{exec.with_stream(nullptr)}
{
    require_cpu(exec, "Event");
}
Event::~Event() { release(); }
Event::Event(Event&& other) noexcept
    : exec_{other.exec_},
      host_time_{other.host_time_},
      recorded_{std::exchange(other.recorded_, false)}
{}
Event& Event::operator=(Event&& other) noexcept
{
    exec_ = other.exec_;
    host_time_ = other.host_time_;
    recorded_ = std::exchange(other.recorded_, false);
    return *this;
}
void Event::release() noexcept {}

void Event::record(const Executor& exec)
{
    require_cpu(exec, "Event::record");
    host_time_ = std::chrono::steady_clock::now();
    recorded_ = true;
}

// Every CPU kernel has finished when its call returns: recorded is done.
void Event::synchronize() const {}
bool Event::ready() const { return true; }

void stream_wait(const Executor& exec, const Event& event)
{
    require_cpu(exec, "stream_wait");
    if (!event.recorded()) throw std::logic_error{"stream_wait: the event was never recorded"};
}

double elapsed_ms(const Event& start, const Event& stop)
{
    if (!start.recorded() || !stop.recorded()) {
        throw std::logic_error{"elapsed_ms: both events must be recorded first"};
    }
    return std::chrono::duration<double, std::milli>(stop.host_time() - start.host_time()).count();
}

}  // namespace recon::kernels
