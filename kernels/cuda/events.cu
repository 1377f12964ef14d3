// Pinned host memory, owned streams and events for the CUDA backend. CPU
// executors get the host-side behaviour of events.hpp.

#include <cuda_runtime.h>

#include <new>
#include <stdexcept>
#include <utility>

#include "cuda_check.cuh"
#include "kernels/backends.hpp"
#include "kernels/events.hpp"
#include "kernels/host_memory.hpp"
#include "launch.cuh"

namespace recon::kernels {

namespace {
constexpr std::size_t host_alignment = 64;

void require_same_device(const Executor& owner, const Executor& exec, const char* what)
{
    if (owner.backend() != exec.backend() || owner.device() != exec.device()) {
        throw std::logic_error{std::string{what} + ": the executor's backend or device differs "
                                                   "from the event's"};
    }
}
}  // namespace

// --- pinned host memory ------------------------------------------------------

namespace detail {

void* allocate_host(std::size_t bytes, bool& page_locked)
{
    // Without a device, cudaHostAlloc fails; ordinary memory then serves the
    // CPU path, which copies synchronously anyway.
    page_locked = cuda::device_count() > 0;
    if (!page_locked) return ::operator new(bytes, std::align_val_t{host_alignment});
    void* ptr = nullptr;
    // Portable: the memory is pinned for every device, whichever is current.
    RECON_CUDA_TRY(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
    return ptr;
}

void deallocate_host(void* ptr, bool page_locked) noexcept
{
    if (page_locked) {
        RECON_CUDA_TRY_NOTHROW(cudaFreeHost(ptr));
    } else {
        ::operator delete(ptr, std::align_val_t{host_alignment});
    }
}

}  // namespace detail

// --- streams -------------------------------------------------------------------

Stream::Stream(const Executor& exec) : exec_{exec.with_stream(nullptr)}
{
    if (exec.is_cpu()) return;
    cuda::activate(exec);
    cudaStream_t stream = nullptr;
    RECON_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    exec_ = exec.with_stream(stream);
}

Stream::~Stream() { release(); }

Stream::Stream(Stream&& other) noexcept : exec_{other.exec_}
{
    other.exec_ = other.exec_.with_stream(nullptr);
}

Stream& Stream::operator=(Stream&& other) noexcept
{
    if (this != &other) {
        release();
        exec_ = other.exec_;
        other.exec_ = other.exec_.with_stream(nullptr);
    }
    return *this;
}

void Stream::release() noexcept
{
    if (exec_.is_cpu() || exec_.stream() == nullptr) return;
    // cudaStreamDestroy returns at once; work still queued completes.
    RECON_CUDA_TRY_NOTHROW(cudaStreamDestroy(exec_.stream()));
    exec_ = exec_.with_stream(nullptr);
}

// --- events --------------------------------------------------------------------

Event::Event(const Executor& exec) : exec_{exec.with_stream(nullptr)}
{
    if (exec.is_cpu()) return;
    cuda::activate(exec);
    RECON_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDefault));
}

Event::~Event() { release(); }

Event::Event(Event&& other) noexcept
    : exec_{other.exec_},
      event_{std::exchange(other.event_, nullptr)},
      host_time_{other.host_time_},
      recorded_{std::exchange(other.recorded_, false)}
{}

Event& Event::operator=(Event&& other) noexcept
{
    if (this != &other) {
        release();
        exec_ = other.exec_;
        event_ = std::exchange(other.event_, nullptr);
        host_time_ = other.host_time_;
        recorded_ = std::exchange(other.recorded_, false);
    }
    return *this;
}

void Event::release() noexcept
{
    if (event_ == nullptr) return;
    RECON_CUDA_TRY_NOTHROW(cudaEventDestroy(event_));
    event_ = nullptr;
}

void Event::record(const Executor& exec)
{
    require_same_device(exec_, exec, "Event::record");
    if (exec.is_cpu()) {
        host_time_ = std::chrono::steady_clock::now();
    } else {
        cuda::activate(exec);
        RECON_CUDA_TRY(cudaEventRecord(event_, cuda::stream_of(exec)));
    }
    recorded_ = true;
}

void Event::synchronize() const
{
    if (event_ == nullptr || !recorded_) return;
    RECON_CUDA_TRY(cudaEventSynchronize(event_));
}

bool Event::ready() const
{
    if (event_ == nullptr || !recorded_) return true;
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    RECON_CUDA_TRY(status);
    return true;
}

void stream_wait(const Executor& exec, const Event& event)
{
    require_same_device(event.executor(), exec, "stream_wait");
    if (!event.recorded()) throw std::logic_error{"stream_wait: the event was never recorded"};
    if (exec.is_cpu()) return;
    cuda::activate(exec);
    RECON_CUDA_TRY(cudaStreamWaitEvent(cuda::stream_of(exec), event.get(), 0));
}

double elapsed_ms(const Event& start, const Event& stop)
{
    if (!start.recorded() || !stop.recorded()) {
        throw std::logic_error{"elapsed_ms: both events must be recorded first"};
    }
    require_same_device(start.executor(), stop.executor(), "elapsed_ms");
    if (start.executor().is_cpu()) {
        return std::chrono::duration<double, std::milli>(stop.host_time() - start.host_time())
            .count();
    }
    start.synchronize();  // on another stream it may complete after `stop`
    stop.synchronize();
    float ms = 0.0f;
    RECON_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return ms;
}

}  // namespace recon::kernels
