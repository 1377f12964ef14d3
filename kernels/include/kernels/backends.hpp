#pragma once
// The per-backend implementations of primitives.inc, plus each backend's
// memory and device hooks. Included by kernels/dispatch.cpp and the backends
// only; users call the dispatching functions in primitives.hpp.

#include <cstddef>
#include <string>

#include "kernels/primitives.hpp"

namespace recon::kernels::cpu {
#include "kernels/primitives.inc"
}  // namespace recon::kernels::cpu

namespace recon::kernels::cuda {
#include "kernels/primitives.inc"

void* allocate(const Executor& exec, std::size_t bytes);
void deallocate(const Executor& exec, void* ptr) noexcept;
void copy_bytes(const Executor& dst_exec, void* dst, const Executor& src_exec,
                const void* src, std::size_t bytes);
void synchronize(const Executor& exec);
/// Makes exec's device the calling thread's current device (the CUDA
/// runtime keeps one per thread; each worker thread may drive another GPU).
void activate(const Executor& exec);
bool compiled();
int device_count();
std::string device_name(int device);
}  // namespace recon::kernels::cuda
