#pragma once
// Error checking for CUDA runtime calls and kernel launches: throw with file
// and line (RECON_CUDA_TRY), or log and continue in destructors
// (RECON_CUDA_TRY_NOTHROW).

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace recon::kernels::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file,
                                          int line)
{
    throw std::runtime_error{std::string{"CUDA error "} + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ") in " + expr + " at " + file + ":" +
                             std::to_string(line)};
}

}  // namespace recon::kernels::cuda

#define RECON_CUDA_TRY(expr)                                                               \
    do {                                                                                   \
        const cudaError_t recon_err_ = (expr);                                             \
        if (recon_err_ != cudaSuccess) {                                                   \
            ::recon::kernels::cuda::throw_cuda_error(recon_err_, #expr, __FILE__, __LINE__); \
        }                                                                                  \
    } while (false)

#define RECON_CUDA_TRY_NOTHROW(expr)                                                       \
    do {                                                                                   \
        const cudaError_t recon_err_ = (expr);                                             \
        if (recon_err_ != cudaSuccess) {                                                   \
            std::fprintf(stderr, "CUDA error %s in %s at %s:%d\n",                        \
                         cudaGetErrorName(recon_err_), #expr, __FILE__, __LINE__);         \
        }                                                                                  \
    } while (false)

/// Checks the launch that was just queued.
#define RECON_CUDA_CHECK_LAUNCH() RECON_CUDA_TRY(cudaGetLastError())
