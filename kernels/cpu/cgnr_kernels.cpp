// The CGNR step kernels on the CPU (reference loops with OpenMP).

#include <stdexcept>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cgnr_scalars.hpp"

namespace recon::kernels::cpu {
namespace {

double dot(const float* x, const float* y, size_type len)
{
    double sum = 0.0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (parallel_worthwhile(len))
    for (size_type i = 0; i < len; ++i) sum += static_cast<double>(x[i]) * y[i];
    return sum;
}

bool running(const CgnrScalars& s) { return s.status == SolveStatus::running; }

}  // namespace

void cgnr_init(const Executor&, const CgnrParams& params, int batch, View<const float> g,
               View<const float> reference, View<float> d, View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    for (int b = 0; b < batch; ++b) {
        const float* gb = g.data + b * n;
        float* db = d.data + b * n;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (size_type i = 0; i < n; ++i) db[i] = -gb[i];
        const float* rb = reference.data ? reference.data + b * n : gb;
        cgnr_scalars_begin(scalars[b], params, dot(gb, gb, n), dot(rb, rb, n));
    }
}

void cgnr_step_dots(const Executor&, int batch, View<const float> d, View<const float> e,
                    View<const float> g, View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b])) continue;
        scalars[b].f = dot(d.data + b * n, e.data + b * n, n);
        scalars[b].gd = dot(g.data + b * n, d.data + b * n, n);
    }
}

void cgnr_step_dots_folded(const Executor& exec, int batch, const RegularizerFold& fold,
                           View<const float> d, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx)
{
    cpu::regularizer_apply_add(exec, fold.terms, fold.grid, batch, fold.state, fold.base, fold.v, e);
    cpu::cgnr_step_dots(exec, batch, d, View<const float>{e.data, e.size}, g, scalars);
    if (fx.data != nullptr) {
        cpu::regularizer_apply_add(exec, fold.terms, fold.grid, batch, fold.state, {}, x, fx);
    }
}

// The CPU's products read d itself: no copy of d to keep.
size_type direction_cache_size(const Executor&, const SystemView&, int) { return 0; }

void direction_cache_fill(const Executor&, const SystemView&, int, View<const float>,
                          View<float> cache)
{
    if (cache.size != 0) throw std::invalid_argument{"the CPU keeps no direction cache"};
}

void cgnr_step_direction_cached(const Executor& exec, const SystemView&, int batch,
                                View<const float> g, View<float> d, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    if (cache.size != 0) throw std::invalid_argument{"the CPU keeps no direction cache"};
    if (prepare.terms.count > 0) {
        cpu::cgnr_step_direction_folded(exec, batch, g, d, scalars, prepare);
    } else {
        cpu::cgnr_step_direction(exec, batch, g, d, scalars);
    }
}

void cgnr_step_update_direction(const Executor& exec, const SystemView& system,
                                const CgnrParams& params, int batch, View<float> d,
                                View<const float> u, View<const float> e, View<const float> fx,
                                View<float> x, View<float> h, View<float> g, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    cpu::cgnr_step_update_beta(exec, params, batch, View<const float>{d.data, d.size}, u, e, fx,
                               x, h, g, scalars);
    cpu::cgnr_step_direction_cached(exec, system, batch, View<const float>{g.data, g.size}, d,
                                    cache, scalars, prepare);
}

void cgnr_step_one_pass(const Executor& exec, const SystemView& system, const CgnrParams& params,
                        int batch, View<float> d, View<float> u, const RegularizerFold& fold,
                        View<float> e, View<float> fx, View<float> x, View<float> h,
                        View<float> g, View<float> cache, View<CgnrScalars> scalars,
                        const RegularizerPrepare& prepare)
{
    cpu::cgnr_step_normal_dots(exec, system, batch, View<const float>{d.data, d.size}, u, {}, fold,
                               View<const float>{g.data, g.size}, e, scalars,
                               View<const float>{x.data, x.size}, fx,
                               View<const float>{cache.data, cache.size});
    cpu::cgnr_step_update_direction(exec, system, params, batch, d,
                                    View<const float>{u.data, u.size},
                                    View<const float>{e.data, e.size},
                                    View<const float>{fx.data, fx.size}, x, h, g, cache, scalars,
                                    prepare);
}

void cgnr_step_replacement(const Executor& exec, const SystemView& system,
                           const CgnrParams& params, int batch, View<float> d, View<float> u,
                           const RegularizerFold& fold, View<float> e, View<float> fx,
                           View<float> x, View<const float> b, View<float> r, View<float> h,
                           View<float> g, View<float> cache, View<CgnrScalars> scalars,
                           const RegularizerPrepare& prepare)
{
    cpu::residual(exec, system, batch, View<const float>{x.data, x.size}, b, r);
    cpu::apply_adjoint(exec, system, batch, View<const float>{r.data, r.size}, h);
    cpu::cgnr_step_one_pass(exec, system, params, batch, d, u, fold, e, fx, x, h, g, cache,
                            scalars, prepare);
}

void cgnr_step_normal_dots(const Executor& exec, const SystemView& system, int batch,
                           View<const float> d, View<float> u, View<float> q,
                           const RegularizerFold& fold, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx,
                           View<const float>)
{
    cpu::normal_apply(exec, system, batch, d, u, q);
    const View<const float> u_in{u.data, u.size};
    if (fold.terms.count > 0) {
        RegularizerFold at_u = fold;
        at_u.base = u_in;
        cpu::cgnr_step_dots_folded(exec, batch, at_u, d, g, e, scalars, x, fx);
    } else {
        cpu::cgnr_step_dots(exec, batch, d, u_in, g, scalars);
    }
}

void cgnr_step_update(const Executor&, int batch, View<const float> d, View<const float> u,
                      View<float> x, View<float> h, View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b]) || !cgnr_scalars_alpha(scalars[b])) continue;
        const float alpha = static_cast<float>(scalars[b].alpha);
        const float* db = d.data + b * n;
        const float* ub = u.data + b * n;
        float* xb = x.data + b * n;
        float* hb = h.data ? h.data + b * n : nullptr;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (size_type i = 0; i < n; ++i) {
            xb[i] += alpha * db[i];
            if (hb) hb[i] += alpha * ub[i];
        }
    }
}

void cgnr_step_update_beta(const Executor& exec, const CgnrParams& params, int batch,
                           View<const float> d, View<const float> u, View<const float> e,
                           View<const float> fx, View<float> x, View<float> h, View<float> g,
                           View<CgnrScalars> scalars)
{
    const size_type n = d.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b]) || !cgnr_scalars_alpha(scalars[b])) continue;
        const float alpha = static_cast<float>(scalars[b].alpha);
        const size_type o = b * n;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (size_type i = o; i < o + n; ++i) {
            const float hk = h[i];
            x[i] += alpha * d[i];
            h[i] = hk + alpha * u[i];
            if (fx.data != nullptr) {
                g[i] = hk + fx[i] + alpha * e[i];
            } else if (g.data != h.data) {
                g[i] = h[i];
            }
        }
    }
    // β and the stop tests over the new g (frames whose α failed stopped above)
    cpu::cgnr_step_beta(exec, params, batch, View<const float>{g.data, g.size}, e, scalars);
}

void cgnr_update_residual(const Executor&, int batch, View<const float> q, View<float> r,
                          View<CgnrScalars> scalars)
{
    const size_type m = q.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b])) continue;
        const float alpha = static_cast<float>(scalars[b].alpha);
        const float* qb = q.data + b * m;
        float* rb = r.data + b * m;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(m))
        for (size_type i = 0; i < m; ++i) rb[i] += alpha * qb[i];
    }
}

void cgnr_step_beta(const Executor&, const CgnrParams& params, int batch, View<const float> g,
                    View<const float> e, View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b])) continue;
        const float* gb = g.data + b * n;
        cgnr_scalars_end(scalars[b], params, dot(gb, e.data + b * n, n), dot(gb, gb, n));
    }
}

void cgnr_step_beta_folded(const Executor& exec, const CgnrParams& params, int batch,
                           const RegularizerFold& fold, View<const float> e, View<float> g,
                           View<CgnrScalars> scalars)
{
    cpu::regularizer_apply_add(exec, fold.terms, fold.grid, batch, fold.state, fold.base, fold.v, g);
    cpu::cgnr_step_beta(exec, params, batch, View<const float>{g.data, g.size}, e, scalars);
}

void cgnr_step_direction(const Executor&, int batch, View<const float> g, View<float> d,
                         View<CgnrScalars> scalars)
{
    const size_type n = g.size / batch;
    for (int b = 0; b < batch; ++b) {
        if (!running(scalars[b])) continue;
        const float beta = static_cast<float>(scalars[b].beta);
        const float* gb = g.data + b * n;
        float* db = d.data + b * n;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(n))
        for (size_type i = 0; i < n; ++i) db[i] = -gb[i] + beta * db[i];
    }
}

void cgnr_step_direction_folded(const Executor& exec, int batch, View<const float> g,
                                View<float> d, View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    cpu::cgnr_step_direction(exec, batch, g, d, scalars);
    cpu::regularizer_prepare(exec, prepare.terms, prepare.grid, batch, prepare.p, prepare.state);
}

}  // namespace recon::kernels::cpu
