#include "pipeline/device.hpp"

#include <stdexcept>

#include <omp.h>

namespace recon::pipeline {

kernels::Executor select_device(const std::string& device)
{
    if (device == "cpu") return kernels::Executor::cpu();
    if (device == "auto") {
        return kernels::cuda_device_count() > 0 ? kernels::Executor::cuda(0)
                                                : kernels::Executor::cpu();
    }
    if (device == "cuda") {
        if (!kernels::cuda_compiled()) {
            throw std::runtime_error{
                "pipeline.device: expected a CUDA device, found a build without the CUDA "
                "backend (use --device cpu or auto)"};
        }
        if (kernels::cuda_device_count() == 0) {
            throw std::runtime_error{
                "pipeline.device: expected a CUDA device, found none (no GPU or no driver; "
                "use --device cpu or auto)"};
        }
        return kernels::Executor::cuda(0);
    }
    throw std::invalid_argument{"pipeline.device: expected cpu, cuda or auto, found '" + device +
                                "'"};
}

void set_cpu_threads(int threads)
{
    if (threads > 0) omp_set_num_threads(threads);
}

}  // namespace recon::pipeline
