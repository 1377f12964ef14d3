// Front end of the primitives: one switch on the backend per call.

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "kernels/backends.hpp"
#include "kernels/memory.hpp"

namespace recon::kernels {

const char* to_string(Backend backend)
{
    return backend == Backend::cpu ? "cpu" : "cuda";
}

const char* to_string(SolveStatus status)
{
    switch (status) {
    case SolveStatus::running: return "running";
    case SolveStatus::converged: return "converged";
    case SolveStatus::max_iterations: return "max_iterations";
    case SolveStatus::breakdown: return "breakdown";
    case SolveStatus::non_finite: return "non_finite";
    }
    return "unknown";
}

void Executor::synchronize() const
{
    if (backend_ == Backend::cuda) cuda::synchronize(*this);
}

bool cuda_compiled() { return cuda::compiled(); }
int cuda_device_count() { return cuda::device_count(); }

std::string device_name(const Executor& exec)
{
    return exec.is_cpu() ? std::string{"cpu"} : cuda::device_name(exec.device());
}

namespace detail {

namespace {
constexpr std::size_t host_alignment = 64;
}

void* allocate(const Executor& exec, std::size_t bytes)
{
    if (exec.is_cpu()) {
        return ::operator new(bytes, std::align_val_t{host_alignment});
    }
    return cuda::allocate(exec, bytes);
}

void deallocate(const Executor& exec, void* ptr) noexcept
{
    if (exec.is_cpu()) {
        ::operator delete(ptr, std::align_val_t{host_alignment});
    } else {
        cuda::deallocate(exec, ptr);
    }
}

void copy_bytes(const Executor& dst_exec, void* dst, const Executor& src_exec,
                const void* src, std::size_t bytes)
{
    if (bytes == 0) return;
    if (dst_exec.is_cpu() && src_exec.is_cpu()) {
        std::memcpy(dst, src, bytes);
    } else {
        cuda::copy_bytes(dst_exec, dst, src_exec, src, bytes);
    }
}

}  // namespace detail

#define RECON_DISPATCH(name, ...)                                   \
    switch (exec.backend()) {                                       \
    case Backend::cpu: return cpu::name(__VA_ARGS__);               \
    case Backend::cuda: cuda::activate(exec); return cuda::name(__VA_ARGS__); \
    }                                                               \
    throw std::logic_error{"unknown backend in " #name}

void apply(const Executor& exec, const SystemView& system, int batch,
           View<const float> x, View<float> y)
{
    RECON_DISPATCH(apply, exec, system, batch, x, y);
}

void residual(const Executor& exec, const SystemView& system, int batch,
              View<const float> x, View<const float> b, View<float> r)
{
    RECON_DISPATCH(residual, exec, system, batch, x, b, r);
}

void apply_adjoint(const Executor& exec, const SystemView& system, int batch,
                   View<const float> y, View<float> x)
{
    RECON_DISPATCH(apply_adjoint, exec, system, batch, y, x);
}

void normal_apply(const Executor& exec, const SystemView& system, int batch,
                  View<const float> d, View<float> u, View<float> q)
{
    RECON_DISPATCH(normal_apply, exec, system, batch, d, u, q);
}

void axpby(const Executor& exec, float a, View<const float> x, float b,
           View<const float> y, View<float> out)
{
    RECON_DISPATCH(axpby, exec, a, x, b, y, out);
}

void batched_dot(const Executor& exec, int batch, View<const float> x,
                 View<const float> y, View<double> out)
{
    RECON_DISPATCH(batched_dot, exec, batch, x, y, out);
}

void fill(const Executor& exec, View<float> out, float value)
{
    RECON_DISPATCH(fill, exec, out, value);
}

void regularizer_prepare(const Executor& exec, const RegularizerTerms& terms,
                         ImageGrid grid, int batch, View<const float> p,
                         View<float> state)
{
    RECON_DISPATCH(regularizer_prepare, exec, terms, grid, batch, p, state);
}

void regularizer_apply_add(const Executor& exec, const RegularizerTerms& terms,
                           ImageGrid grid, int batch, View<const float> state,
                           View<const float> base, View<const float> v,
                           View<float> out)
{
    RECON_DISPATCH(regularizer_apply_add, exec, terms, grid, batch, state, base, v, out);
}

void cgnr_init(const Executor& exec, const CgnrParams& params, int batch,
               View<const float> g, View<const float> reference, View<float> d,
               View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_init, exec, params, batch, g, reference, d, scalars);
}

void cgnr_step_dots(const Executor& exec, int batch, View<const float> d,
                    View<const float> e, View<const float> g,
                    View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_dots, exec, batch, d, e, g, scalars);
}

size_type direction_cache_size(const Executor& exec, const SystemView& system, int batch)
{
    RECON_DISPATCH(direction_cache_size, exec, system, batch);
}

void direction_cache_fill(const Executor& exec, const SystemView& system, int batch,
                          View<const float> d, View<float> cache)
{
    RECON_DISPATCH(direction_cache_fill, exec, system, batch, d, cache);
}

void cgnr_step_normal_dots(const Executor& exec, const SystemView& system, int batch,
                           View<const float> d, View<float> u, View<float> q,
                           const RegularizerFold& fold, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx,
                           View<const float> d_cache)
{
    RECON_DISPATCH(cgnr_step_normal_dots, exec, system, batch, d, u, q, fold, g, e, scalars, x,
                   fx, d_cache);
}

void cgnr_step_update_direction(const Executor& exec, const SystemView& system,
                                const CgnrParams& params, int batch, View<float> d,
                                View<const float> u, View<const float> e, View<const float> fx,
                                View<float> x, View<float> h, View<float> g, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    RECON_DISPATCH(cgnr_step_update_direction, exec, system, params, batch, d, u, e, fx, x, h, g,
                   cache, scalars, prepare);
}

void cgnr_step_one_pass(const Executor& exec, const SystemView& system, const CgnrParams& params,
                        int batch, View<float> d, View<float> u, const RegularizerFold& fold,
                        View<float> e, View<float> fx, View<float> x, View<float> h,
                        View<float> g, View<float> cache, View<CgnrScalars> scalars,
                        const RegularizerPrepare& prepare)
{
    RECON_DISPATCH(cgnr_step_one_pass, exec, system, params, batch, d, u, fold, e, fx, x, h, g,
                   cache, scalars, prepare);
}

void cgnr_step_replacement(const Executor& exec, const SystemView& system,
                           const CgnrParams& params, int batch, View<float> d, View<float> u,
                           const RegularizerFold& fold, View<float> e, View<float> fx,
                           View<float> x, View<const float> b, View<float> r, View<float> h,
                           View<float> g, View<float> cache, View<CgnrScalars> scalars,
                           const RegularizerPrepare& prepare)
{
    RECON_DISPATCH(cgnr_step_replacement, exec, system, params, batch, d, u, fold, e, fx, x, b, r,
                   h, g, cache, scalars, prepare);
}

void cgnr_step_direction_cached(const Executor& exec, const SystemView& system, int batch,
                                View<const float> g, View<float> d, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    RECON_DISPATCH(cgnr_step_direction_cached, exec, system, batch, g, d, cache, scalars, prepare);
}

void cgnr_step_dots_folded(const Executor& exec, int batch, const RegularizerFold& fold,
                           View<const float> d, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx)
{
    RECON_DISPATCH(cgnr_step_dots_folded, exec, batch, fold, d, g, e, scalars, x, fx);
}

void cgnr_step_update_beta(const Executor& exec, const CgnrParams& params, int batch,
                           View<const float> d, View<const float> u, View<const float> e,
                           View<const float> fx, View<float> x, View<float> h, View<float> g,
                           View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_update_beta, exec, params, batch, d, u, e, fx, x, h, g, scalars);
}

void cgnr_step_update(const Executor& exec, int batch, View<const float> d,
                      View<const float> u, View<float> x, View<float> h,
                      View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_update, exec, batch, d, u, x, h, scalars);
}

void cgnr_update_residual(const Executor& exec, int batch, View<const float> q,
                          View<float> r, View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_update_residual, exec, batch, q, r, scalars);
}

void cgnr_step_beta(const Executor& exec, const CgnrParams& params, int batch,
                    View<const float> g, View<const float> e,
                    View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_beta, exec, params, batch, g, e, scalars);
}

void cgnr_step_beta_folded(const Executor& exec, const CgnrParams& params, int batch,
                           const RegularizerFold& fold, View<const float> e, View<float> g,
                           View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_beta_folded, exec, params, batch, fold, e, g, scalars);
}

void cgnr_step_direction(const Executor& exec, int batch, View<const float> g,
                         View<float> d, View<CgnrScalars> scalars)
{
    RECON_DISPATCH(cgnr_step_direction, exec, batch, g, d, scalars);
}

void cgnr_step_direction_folded(const Executor& exec, int batch, View<const float> g,
                                View<float> d, View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    RECON_DISPATCH(cgnr_step_direction_folded, exec, batch, g, d, scalars, prepare);
}

#undef RECON_DISPATCH

}  // namespace recon::kernels
