// The CUDA backend of a build without CUDA: queries report no device, and
// everything else throws a clear error instead of failing to link.

#include <stdexcept>
#include <string>

#include "kernels/backends.hpp"

#define RECON_UNAVAILABLE_MESSAGE \
    "this build has no CUDA backend (reconfigure with a CUDA compiler and RECON_WITH_CUDA=ON)"

namespace recon::kernels::cuda {

#include "unavailable_primitives.inc"

bool compiled() { return false; }
void activate(const Executor&) {}
int device_count() { return 0; }
std::string device_name(int) { throw std::runtime_error{RECON_UNAVAILABLE_MESSAGE}; }
void* allocate(const Executor&, std::size_t) { throw std::runtime_error{RECON_UNAVAILABLE_MESSAGE}; }
void deallocate(const Executor&, void*) noexcept {}
void copy_bytes(const Executor&, void*, const Executor&, const void*, std::size_t)
{
    throw std::runtime_error{RECON_UNAVAILABLE_MESSAGE};
}
void synchronize(const Executor&) { throw std::runtime_error{RECON_UNAVAILABLE_MESSAGE}; }

}  // namespace recon::kernels::cuda
