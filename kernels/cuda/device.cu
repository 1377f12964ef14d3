// Device memory, copies, device queries and per-stream scratch memory for
// the CUDA backend.

#include <cuda_runtime.h>

#include <thread>
#include <tuple>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_check.cuh"
#include "kernels/backends.hpp"
#include "launch.cuh"

namespace recon::kernels::cuda {

bool compiled() { return true; }

int device_count()
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver / no device" error
        return 0;
    }
    return count;
}

std::string device_name(int device)
{
    cudaDeviceProp prop{};
    RECON_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    return prop.name;
}

int device_attribute(const Executor& exec, cudaDeviceAttr attribute)
{
    static std::mutex mutex;
    static std::map<std::pair<int, int>, int> values;
    const std::lock_guard lock{mutex};
    const std::pair<int, int> key{exec.device(), static_cast<int>(attribute)};
    auto it = values.find(key);
    if (it == values.end()) {
        int value = 0;
        RECON_CUDA_TRY(cudaDeviceGetAttribute(&value, attribute, exec.device()));
        it = values.emplace(key, value).first;
    }
    return it->second;
}

int sm_count(const Executor& exec)
{
    return device_attribute(exec, cudaDevAttrMultiProcessorCount);
}

void allow_dynamic_shared(const Executor& exec, const void* kernel, std::size_t bytes)
{
    static std::mutex mutex;
    static std::map<std::pair<int, const void*>, std::size_t> allowed;
    const std::lock_guard lock{mutex};
    std::size_t& given = allowed[{exec.device(), kernel}];
    if (bytes <= given) return;
    RECON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    given = bytes;
}

int environment_choice(const char* variable, std::initializer_list<std::string_view> choices)
{
    const char* value = std::getenv(variable);
    if (value == nullptr) return 0;
    int index = 0;
    std::string expected;
    for (const std::string_view choice : choices) {
        if (choice == value) return index;
        if (index > 0) expected += index + 1 == static_cast<int>(choices.size()) ? " or " : ", ";
        expected += choice;
        ++index;
    }
    throw std::invalid_argument{std::string{variable} + ": expected " + expected + ", found '" +
                                value + "'"};
}

int resident_per_sm(const Executor& exec, const void* kernel, unsigned threads,
                    std::size_t shared_bytes)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, unsigned, std::size_t>, int> counts;
    const std::lock_guard lock{mutex};
    const std::tuple<int, const void*, unsigned, std::size_t> key{exec.device(), kernel, threads,
                                                                  shared_bytes};
    auto it = counts.find(key);
    if (it == counts.end()) {
        int per_sm = 0;
        RECON_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel, static_cast<int>(threads), shared_bytes));
        it = counts.emplace(key, per_sm).first;
    }
    return it->second;
}

void* allocate(const Executor& exec, std::size_t bytes)
{
    RECON_CUDA_TRY(cudaSetDevice(exec.device()));
    void* ptr = nullptr;
    RECON_CUDA_TRY(cudaMalloc(&ptr, bytes));
    return ptr;
}

void deallocate(const Executor&, void* ptr) noexcept
{
    RECON_CUDA_TRY_NOTHROW(cudaFree(ptr));
}

void copy_bytes(const Executor& dst_exec, void* dst, const Executor& src_exec,
                const void* src, std::size_t bytes)
{
    const Executor& device_side = dst_exec.is_cpu() ? src_exec : dst_exec;
    activate(device_side);
    RECON_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(device_side)));
}

void synchronize(const Executor& exec)
{
    activate(exec);
    RECON_CUDA_TRY(cudaStreamSynchronize(stream_of(exec)));
}

void activate(const Executor& exec)
{
    int current = -1;
    RECON_CUDA_TRY(cudaGetDevice(&current));
    if (current != exec.device()) RECON_CUDA_TRY(cudaSetDevice(exec.device()));
}

// --- scratch -------------------------------------------------------------------

namespace {

__global__ void zero_bytes_kernel(unsigned char* p, std::size_t bytes)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
         i < bytes; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        p[i] = 0;
    }
}

struct Buffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
};

/// Scratch buffers per (device, stream, slot). They live until the process
/// ends (the driver releases them then): captured graphs may hold their
/// addresses, and freeing during static destruction races the runtime's own
/// teardown.
class ScratchPool {
public:
    void* get(const Executor& exec, ScratchSlot slot, std::size_t bytes, bool zeroed)
    {
        const std::lock_guard lock{mutex_};
        auto& buffer = live_[key(exec)][static_cast<int>(slot)];
        if (buffer.bytes >= bytes) return buffer.ptr;
        if (buffer.ptr != nullptr) retired_.push_back(buffer.ptr);
        RECON_CUDA_TRY(cudaSetDevice(exec.device()));
        void* ptr = nullptr;
        RECON_CUDA_TRY(cudaMalloc(&ptr, bytes));
        buffer = Buffer{ptr, bytes};
        if (zeroed) {
            zero_bytes_kernel<<<blocks_for(static_cast<long long>(bytes), 256, 1024), 256, 0,
                                stream_of(exec)>>>(static_cast<unsigned char*>(ptr), bytes);
            RECON_CUDA_CHECK_LAUNCH();
        }
        return ptr;
    }

private:
    // cudaStreamPerThread is one handle value for every thread, yet each
    // thread's work on it runs concurrently with the others': buffers for it
    // are per thread too, or two workers on one GPU race on their scratch.
    using Key = std::tuple<int, cudaStream_t, std::thread::id>;
    static Key key(const Executor& exec)
    {
        const cudaStream_t stream = stream_of(exec);
        return {exec.device(), stream,
                stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id{}};
    }

    std::mutex mutex_;
    std::map<Key, std::array<Buffer, static_cast<int>(ScratchSlot::count_)>> live_;
    std::vector<void*> retired_;
};

ScratchPool& pool()
{
    static ScratchPool* instance = new ScratchPool;  // never destroyed, see above
    return *instance;
}

}  // namespace

void* scratch(const Executor& exec, ScratchSlot slot, std::size_t bytes, bool zeroed)
{
    return pool().get(exec, slot, bytes, zeroed);
}

ReductionScratch reduction_scratch(const Executor& exec, long long frames, long long blocks)
{
    auto* tickets = static_cast<unsigned*>(
        scratch(exec, ScratchSlot::reduction, sizeof(unsigned) * max_frames, true));
    // Not zeroed: every slot a reduction reads, its blocks stored first.
    const auto slots = static_cast<std::size_t>(std::max(1LL, frames) * std::max(1LL, blocks));
    auto* partials = static_cast<double2*>(
        scratch(exec, ScratchSlot::reduction_partials, sizeof(double2) * slots, false));
    return {partials, tickets};
}

}  // namespace recon::kernels::cuda
