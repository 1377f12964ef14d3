#pragma once
// Where kernels run: the CPU (OpenMP) or one CUDA device and stream.
// No CUDA header is included here; a stream is the opaque CUstream_st*.

#include <string>

struct CUstream_st;

namespace recon::kernels {

enum class Backend { cpu, cuda };

const char* to_string(Backend backend);

/// Value type naming a backend, a device and (for CUDA) the stream that
/// every kernel launched through it is queued on. Cheap to copy; owns nothing.
class Executor {
public:
    static Executor cpu() { return Executor{Backend::cpu, 0, nullptr}; }
    /// A CUDA executor on `device`, launching on `stream` (nullptr: the
    /// per-thread default stream).
    static Executor cuda(int device, CUstream_st* stream = nullptr)
    {
        return Executor{Backend::cuda, device, stream};
    }

    Backend backend() const { return backend_; }
    int device() const { return device_; }
    CUstream_st* stream() const { return stream_; }
    bool is_cpu() const { return backend_ == Backend::cpu; }

    /// Blocks until all work queued on this executor has finished
    /// (a no-op on the CPU, where kernels are synchronous).
    void synchronize() const;

    /// The same device and backend, launching on another stream.
    Executor with_stream(CUstream_st* stream) const
    {
        return Executor{backend_, device_, stream};
    }

    friend bool operator==(const Executor& a, const Executor& b)
    {
        return a.backend_ == b.backend_ && a.device_ == b.device_;
    }

private:
    Executor(Backend backend, int device, CUstream_st* stream)
        : backend_{backend}, device_{device}, stream_{stream}
    {}

    Backend backend_;
    int device_;
    CUstream_st* stream_;
};

/// True when this build has the CUDA backend compiled in.
bool cuda_compiled();
/// Number of usable CUDA devices (0 when not compiled or no driver/device).
int cuda_device_count();
/// Human-readable device name, e.g. "NVIDIA H100 80GB HBM3"; "cpu" for the CPU.
std::string device_name(const Executor& exec);

}  // namespace recon::kernels
