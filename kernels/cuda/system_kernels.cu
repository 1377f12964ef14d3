// A x, Aᵀ y and the fused Aᵀ(A d) on the GPU for every system model.
//
// Row-driven models (stored CSR / sliced ELLPACK-T, synthetic rows made on
// the fly): one thread per row; Aᵀ scatters into a per-block image in shared
// memory when the image fits (few global atomics: one per pixel and block),
// else straight into global memory. Parallel-beam rows: A x by rays over
// image lines staged in shared memory (or over padded pair images of x),
// Aᵀ y pixel-driven over per-tile tables of y (a gather, no atomics), with
// the same weights (parallel2d_kernels.cuh). Frames are processed 4 or 1 at
// a time per pass over the rows.

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "kernels/backends.hpp"
#include "cgnr_ops.cuh"
#include "cooperative_step.cuh"
#include "kernels/baselines.hpp"
#include "parallel2d_kernels.cuh"
#include "system_kernels.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int row_threads = 256;
constexpr int scatter_threads = 1024;
/// Shared memory a scatter block may use for its image (opt-in above 48 KB).
constexpr std::size_t max_shared_image = 96 * 1024;

__global__ void zero_kernel(float* out, size_type n)
{
    for (size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_type>(gridDim.x) * blockDim.x) {
        out[i] = 0.0f;
    }
}

void zero(const Executor& exec, float* out, size_type n)
{
    zero_kernel<<<blocks_for(n, 256, 4096), 256, 0, stream_of(exec)>>>(out, n);
    RECON_CUDA_CHECK_LAUNCH();
}

/// Calls f(integral_constant<int, BT>, first_frame) over the batch in chunks
/// of 4 frames and single frames: 4 frames share each pass over the rows,
/// and 4 images of the paper's size still fit one block's shared memory
/// (16 would not: the scatter would fall back to global atomics).
template <class F>
void for_frame_chunks(int batch, F&& f)
{
    int first = 0;
    for (; first + 4 <= batch; first += 4) f(std::integral_constant<int, 4>{}, first);
    for (; first < batch; ++first) f(std::integral_constant<int, 1>{}, first);
}

// --- parallel2d (kernels and their reasoning: parallel2d_kernels.cuh) ---------------

/// Bytes of the pair images of `frames` frames, rounded up to 256.
std::size_t parallel2d_pair_bytes(const Parallel2dView& sys, int frames)
{
    const std::size_t bytes = static_cast<std::size_t>(p2::pair_frame_size(sys)) * frames *
                              sizeof(float2);
    return (bytes + 255) / 256 * 256;
}

float2* parallel2d_pair_scratch(const Executor& exec, const Parallel2dView& sys, int frames)
{
    return static_cast<float2*>(
        scratch(exec, ScratchSlot::measurement, parallel2d_pair_bytes(sys, frames), false));
}

/// Which kernels make parallel-beam rays (RECON_PARALLEL2D_RAYS, for
/// comparing): `auto` takes the staged lines for chunks of 4 frames where
/// they fit, `lines` for single frames too, `pairs` never. Residuals (sums in
/// double, once per solve) always take the pair images.
enum class RaysMode { automatic, lines, pairs };  // the variable's choices, in order

RaysMode rays_mode()
{
    return static_cast<RaysMode>(
        environment_choice("RECON_PARALLEL2D_RAYS", {"auto", "lines", "pairs"}));
}

/// How parallel2d_lines_kernel covers `sys` for BT frames, or nothing where
/// it is not taken: one frame unless asked for (the pair images are as fast,
/// parallel2d_kernels.cuh), a GPU without clusters (before sm_90), more than
/// 1024 bins per view (one thread per ray), or lines of 8 blocks' share
/// that do not fit one block's shared memory (~340 pixels a side for 4
/// frames). Clusters of 8 blocks, up to 4 views per round, and the fewest
/// rounds that let every block run at once, one per SM: ct_256 on 132 SMs
/// takes 3 rounds of 4 views, 120 blocks of 1,024 threads (see the kernel).
template <int BT>
std::optional<p2::LinesPlan> lines_plan(const Executor& exec, const Parallel2dView& sys)
{
    const RaysMode mode = rays_mode();
    if (mode == RaysMode::pairs || (mode == RaysMode::automatic && BT == 1)) return std::nullopt;
    if (device_attribute(exec, cudaDevAttrClusterLaunch) == 0) return std::nullopt;
    if (sys.bins <= 0 || sys.bins > 1024 || sys.views <= 0 || sys.nx <= 0 || sys.ny <= 0) {
        return std::nullopt;
    }
    p2::LinesPlan plan;
    // (at most 4 views a round and lines_max_rounds rounds: the kernel's
    // table of views holds lines_max_views)
    plan.views_per_round = static_cast<int>(std::clamp<index_t>(1024 / sys.bins, 1, 4));
    plan.threads = static_cast<int>((plan.views_per_round * sys.bins + 31) / 32 * 32);
    plan.segments = p2::lines_max_segments;
    const index_t blocks = sm_count(exec);
    for (plan.rounds = 1; plan.rounds < p2::lines_max_rounds; ++plan.rounds) {
        const index_t group = static_cast<index_t>(plan.views_per_round) * plan.rounds;
        if ((sys.views + group - 1) / group * plan.segments <= blocks) break;
    }
    const index_t longest = std::max(sys.nx, sys.ny);
    plan.line_stride = (longest + 4) | 1;
    plan.lines = (longest + plan.segments - 1) / plan.segments;
    const std::size_t staged =
        static_cast<std::size_t>(plan.lines) * plan.line_stride * sizeof(p2::LineValue<BT>);
    const std::size_t sums =
        static_cast<std::size_t>(plan.threads) * plan.rounds * BT * sizeof(float);
    plan.bytes = std::max(staged, sums);
    const auto limit = static_cast<std::size_t>(
        device_attribute(exec, cudaDevAttrMaxSharedMemoryPerBlockOptin));
    if (plan.bytes > limit) return std::nullopt;
    return plan;
}

template <int BT>
void launch_lines(const Executor& exec, const Parallel2dView& sys, const p2::LinesPlan& plan,
                  const float* x, float* y)
{
    auto kernel = p2::parallel2d_lines_kernel<BT>;
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), plan.bytes);
    cudaLaunchConfig_t config{};
    const int group = plan.views_per_round * plan.rounds;
    config.gridDim = dim3{static_cast<unsigned>(plan.segments),
                          static_cast<unsigned>((sys.views + group - 1) / group)};
    config.blockDim = dim3{static_cast<unsigned>(plan.threads)};
    config.dynamicSmemBytes = plan.bytes;
    config.stream = stream_of(exec);
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = static_cast<unsigned>(plan.segments);
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    RECON_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, sys, plan.views_per_round, plan.rounds,
                                      plan.lines, plan.line_stride, x, y));
}

/// One block per 16 x 16 tile of the image (the adjoint's and the pair
/// images' tiles are the same) and per frame (z).
dim3 image_tiles(const Parallel2dView& sys, int frames = 1)
{
    static_assert(adjoint_tile == p2::pair_tile);
    return {static_cast<unsigned>(adjoint_tiles(sys.nx)),
            static_cast<unsigned>(adjoint_tiles(sys.ny)), static_cast<unsigned>(frames)};
}

/// p2::parallel2d_rays_kernel<BT, Acc> on the system's blocks, compiled for
/// its rays table where it has one. WithResidual: the same walk also gives
/// residual.r = A x − b from x's pair images (one frame).
template <int BT, class Acc, bool WithResidual = false>
void launch_rays(const Parallel2dView& sys, cudaStream_t stream, const float2* pairs,
                 const float* sub, float* y, const p2::ResidualRays& residual = {})
{
    constexpr int threads = 32 * ray_segments;
    auto kernel = sys.rays != nullptr
                      ? p2::parallel2d_rays_kernel<BT, Acc, true, WithResidual>
                      : p2::parallel2d_rays_kernel<BT, Acc, false, WithResidual>;
    kernel<<<static_cast<unsigned>(ray_blocks(sys)), threads, 0, stream>>>(sys, pairs, sub, y,
                                                                          residual);
    RECON_CUDA_CHECK_LAUNCH();
}

/// The pair images of `frames` frames of x into `pairs`.
void launch_pairs(const Parallel2dView& sys, cudaStream_t stream, const float* x, int frames,
                  float2* pairs)
{
    if (cols_of(sys) == 0) return;
    p2::parallel2d_pairs_kernel<<<image_tiles(sys, frames), dim3{p2::pair_tile, p2::pair_tile}, 0,
                                  stream>>>(sys, x, pairs);
    RECON_CUDA_CHECK_LAUNCH();
}

/// y = A x (or A x − sub, a frame at a time, sums in double) for `batch`
/// frames: per chunk of frames the staged-lines kernel where lines_plan
/// takes it, else the pair images (into `pairs`, room for min(batch, 4)
/// frames, or 1 with sub) then the rays. With `ready` (the pair images of
/// every frame of x, frame stride pair_frame_size), single frames' rays
/// read those instead.
void parallel2d_apply(const Executor& exec, const Parallel2dView& sys, int batch, const float* x,
                      float* y, const float* sub, float2* pairs, const float2* ready = nullptr)
{
    const index_t m = rows_of(sys);
    const index_t n = cols_of(sys);
    if (m == 0) return;
    const cudaStream_t stream = stream_of(exec);
    if (sub != nullptr) {
        for (int b = 0; b < batch; ++b) {
            const size_type mb = static_cast<size_type>(b) * m;
            launch_pairs(sys, stream, x + static_cast<size_type>(b) * n, 1, pairs);
            launch_rays<1, double>(sys, stream, pairs, sub + mb, y + mb);
        }
        return;
    }
    for_frame_chunks(batch, [&](auto bt, int first) {
        constexpr int BT = decltype(bt)::value;
        const float* xb = x + static_cast<size_type>(first) * n;
        float* yb = y + static_cast<size_type>(first) * m;
        if (const auto plan = lines_plan<BT>(exec, sys)) {
            launch_lines<BT>(exec, sys, *plan, xb, yb);
            return;
        }
        const float2* rays_from = pairs;
        if (BT == 1 && ready != nullptr) {
            rays_from = ready + static_cast<size_type>(first) * p2::pair_frame_size(sys);
        } else {
            launch_pairs(sys, stream, xb, BT, pairs);
        }
        launch_rays<BT, float>(sys, stream, rays_from, nullptr, yb);
    });
}

/// y = A x, or y = A x − sub (row sums in double) when sub is not null.
template <class System>
void apply_rows(const Executor& exec, const System& sys, int batch, const float* x, float* y,
                const float* sub = nullptr)
{
    const index_t m = rows_of(sys);
    const index_t n = cols_of(sys);
    if (m == 0) return;
    if constexpr (std::is_same_v<System, Parallel2dView>) {
        const int frames = sub != nullptr ? 1 : std::min(batch, 4);
        parallel2d_apply(exec, sys, batch, x, y, sub, parallel2d_pair_scratch(exec, sys, frames));
    } else {
        const dim3 grid{blocks_for(m, row_threads)};
        if (sub != nullptr) {
            // Once per solve (and per residual replacement): a frame at a time.
            for (int b = 0; b < batch; ++b) {
                const size_type mb = static_cast<size_type>(b) * m;
                apply_rows_kernel<1, System, double><<<grid, row_threads, 0, stream_of(exec)>>>(
                    sys, m, n, x + static_cast<size_type>(b) * n, sub + mb, y + mb);
                RECON_CUDA_CHECK_LAUNCH();
            }
            return;
        }
        for_frame_chunks(batch, [&](auto bt, int first) {
            constexpr int BT = decltype(bt)::value;
            apply_rows_kernel<BT, System, float><<<grid, row_threads, 0, stream_of(exec)>>>(
                sys, m, n, x + static_cast<size_type>(first) * n, nullptr,
                y + static_cast<size_type>(first) * m);
            RECON_CUDA_CHECK_LAUNCH();
        });
    }
}

bool shared_image_fits(index_t n, int bt)
{
    return static_cast<std::size_t>(n) * bt * sizeof(float) <= max_shared_image;
}

/// out = Aᵀ in (or Aᵀ(A in) when Fused), `out` overwritten.
template <bool Fused, class System>
void scatter_rows(const Executor& exec, const System& sys, int batch, const float* in,
                  float* out, float* q, Accumulation how)
{
    const index_t m = rows_of(sys);
    const index_t n = cols_of(sys);
    zero(exec, out, static_cast<size_type>(batch) * n);
    if (m == 0) return;
    for_frame_chunks(batch, [&](auto bt, int first) {
        constexpr int BT = decltype(bt)::value;
        const float* in_b = in + static_cast<size_type>(first) * (Fused ? n : m);
        float* out_b = out + static_cast<size_type>(first) * n;
        float* q_b = q != nullptr ? q + static_cast<size_type>(first) * m : nullptr;
        const bool fits = shared_image_fits(n, BT);
        if (how == Accumulation::shared_memory && !fits) {
            throw std::invalid_argument{"shared-memory accumulation needs " +
                                        std::to_string(n * BT * 4) + " bytes per block, over " +
                                        std::to_string(max_shared_image)};
        }
        if (how != Accumulation::global_atomics && fits) {
            const std::size_t bytes = static_cast<std::size_t>(n) * BT * sizeof(float);
            auto kernel = scatter_rows_shared_kernel<BT, Fused, System>;
            allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), bytes);
            // One full block per SM: each block adds its image to `out`
            // once, so fewer, fuller blocks mean fewer global atomics.
            const unsigned blocks = blocks_for(m, scatter_threads, sm_count(exec));
            kernel<<<blocks, scatter_threads, bytes, stream_of(exec)>>>(sys, m, n, in_b, out_b, q_b);
        } else {
            scatter_rows_global_kernel<BT, Fused>
                <<<blocks_for(m, row_threads), row_threads, 0, stream_of(exec)>>>(sys, m, n, in_b,
                                                                                out_b, q_b);
        }
        RECON_CUDA_CHECK_LAUNCH();
    });
}

/// Whether one frame's adjoint takes its tiles in pairs reflected through
/// the image's centre, each weight serving both (p2::parallel2d_adjoint_kernel
/// with Mirrored): where the reflection of a tile is a tile and of a bin a
/// bin, nx a multiple of 32, ny of 16 and the detector centred
/// (center_offset 0). RECON_PARALLEL2D_ADJOINT = `auto` (default) or
/// `tiles` (never), for comparing.
bool parallel2d_adjoint_mirrored(const Parallel2dView& sys)
{
    if (environment_choice("RECON_PARALLEL2D_ADJOINT", {"auto", "tiles"}) != 0) return false;
    return sys.center_offset == 0.0f && sys.nx > 0 && sys.ny > 0 && sys.nx % 32 == 0 &&
           sys.ny % 16 == 0;
}

/// The adjoint's blocks for one frame: a tile each, or (mirrored) a tile of
/// the image's left half and its reflection.
dim3 adjoint_blocks(const Parallel2dView& sys, bool mirrored)
{
    dim3 grid = image_tiles(sys);
    if (mirrored) grid.x /= 2;
    return grid;
}

/// Launches p2::parallel2d_adjoint_kernel<BT, Epilogue, Mirrored> on `grid`.
template <int BT, bool Mirrored, class Epilogue>
void launch_adjoint(const Executor& exec, const Parallel2dView& sys, dim3 grid, const float* y,
                    float* x, const Epilogue& epilogue)
{
    auto kernel = p2::parallel2d_adjoint_kernel<BT, Epilogue, Mirrored>;
    constexpr std::size_t bytes = p2::adjoint_shared_bytes<BT, Mirrored>;
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<grid, p2::adjoint_threads<BT, Mirrored>, bytes, stream_of(exec)>>>(sys, y, x,
                                                                                 epilogue);
    RECON_CUDA_CHECK_LAUNCH();
}

/// x = Aᵀ y for `batch` frames; make_epilogue(first) gives the epilogue of
/// the launch for frames first .. (p2::NoEpilogue or p2::ReduceEpilogue).
template <class MakeEpilogue>
void parallel2d_adjoint(const Executor& exec, const Parallel2dView& sys, int batch,
                        const float* y, float* x, MakeEpilogue&& make_epilogue)
{
    const index_t m = rows_of(sys);
    const index_t n = cols_of(sys);
    if (n == 0) return;
    const bool mirrored = parallel2d_adjoint_mirrored(sys);
    for_frame_chunks(batch, [&](auto bt, int first) {
        constexpr int BT = decltype(bt)::value;
        const float* y_b = y + static_cast<size_type>(first) * m;
        float* x_b = x + static_cast<size_type>(first) * n;
        if constexpr (BT == 1) {
            if (mirrored) {
                launch_adjoint<1, true>(exec, sys, adjoint_blocks(sys, true), y_b, x_b,
                                        make_epilogue(first));
                return;
            }
        }
        launch_adjoint<BT, false>(exec, sys, image_tiles(sys), y_b, x_b, make_epilogue(first));
    });
}

void parallel2d_adjoint(const Executor& exec, const Parallel2dView& sys, int batch,
                        const float* y, float* x)
{
    parallel2d_adjoint(exec, sys, batch, y, x, [](int) { return p2::NoEpilogue{}; });
}

/// The measurement scratch: `q` (when not null) gets room for `batch`
/// frames of A d, then `pairs` room for min(batch, 4) frames' pair images.
void measurement_scratch(const Executor& exec, const Parallel2dView& sys, float** q,
                         float2** pairs, int batch = 1)
{
    const std::size_t q_bytes =
        q == nullptr
            ? 0
            : (static_cast<std::size_t>(rows_of(sys)) * batch * sizeof(float) + 255) / 256 * 256;
    auto* base = static_cast<unsigned char*>(scratch(
        exec, ScratchSlot::measurement, q_bytes + parallel2d_pair_bytes(sys, std::min(batch, 4)),
        false));
    if (q != nullptr) *q = reinterpret_cast<float*>(base);
    *pairs = reinterpret_cast<float2*>(base + q_bytes);
}

/// q = A d into `q`, or into scratch (beside the pair images) when q is
/// null; returns where q is. `ready`: as parallel2d_apply.
float* parallel2d_forward_for_normal(const Executor& exec, const Parallel2dView& sys, int batch,
                                     const float* d, float* q, const float2* ready = nullptr)
{
    float2* pairs = nullptr;
    float* qq = q;
    measurement_scratch(exec, sys, q != nullptr ? nullptr : &qq, &pairs, batch);
    parallel2d_apply(exec, sys, batch, d, qq, nullptr, pairs, ready);
    return qq;
}

void adjoint(const Executor& exec, const SystemView& system, int batch, const float* y, float* x,
             Accumulation how)
{
    std::visit(
        [&](const auto& sys) {
            using System = std::decay_t<decltype(sys)>;
            if constexpr (std::is_same_v<System, Parallel2dView>) {
                parallel2d_adjoint(exec, sys, batch, y, x);
            } else {
                scatter_rows<false>(exec, sys, batch, y, x, nullptr, how);
            }
        },
        system);
}

void normal(const Executor& exec, const SystemView& system, int batch, const float* d, float* u,
            float* q, Accumulation how)
{
    std::visit(
        [&](const auto& sys) {
            using System = std::decay_t<decltype(sys)>;
            if constexpr (std::is_same_v<System, Parallel2dView>) {
                // Rays then pixels: q = A d (kept in scratch when not asked
                // for, next to the pair images of d), u = Aᵀ q gathered per
                // pixel. No atomics.
                parallel2d_adjoint(exec, sys, batch,
                                   parallel2d_forward_for_normal(exec, sys, batch, d, q), u);
            } else {
                scatter_rows<true>(exec, sys, batch, d, u, q, how);
            }
        },
        system);
}

}  // namespace

void apply(const Executor& exec, const SystemView& system, int batch, View<const float> x,
           View<float> y)
{
    std::visit([&](const auto& sys) { apply_rows(exec, sys, batch, x.data, y.data); }, system);
}

void residual(const Executor& exec, const SystemView& system, int batch, View<const float> x,
              View<const float> b, View<float> r)
{
    std::visit([&](const auto& sys) { apply_rows(exec, sys, batch, x.data, r.data, b.data); },
               system);
}

void apply_adjoint(const Executor& exec, const SystemView& system, int batch,
                   View<const float> y, View<float> x)
{
    adjoint(exec, system, batch, y.data, x.data, Accumulation::automatic);
}

void normal_apply(const Executor& exec, const SystemView& system, int batch,
                  View<const float> d, View<float> u, View<float> q)
{
    normal(exec, system, batch, d.data, u.data, q.data, Accumulation::automatic);
}

namespace {

/// The dot step of cgnr_step_normal_dots, per element (cgnr_ops.cuh), for
/// frames of n = d.size / batch pixels: with fold's terms e = u + F(x, d)
/// and fx = F(x, x) are written, without e is u.
StepDotsAt step_dots_at(const RegularizerFold& fold, int batch, View<const float> d,
                        View<const float> g, View<float> e, View<CgnrScalars> scalars,
                        View<const float> x, View<float> fx)
{
    const bool regularized = fold.terms.count > 0;
    return {fold,
            {fold.terms, fold.grid, fold.state, {}, x},
            batch,
            d.data,
            g.data,
            regularized ? e.data : nullptr,
            regularized ? fx.data : nullptr,
            d.size / batch,
            scalars.data};
}

}  // namespace

void cgnr_step_normal_dots(const Executor& exec, const SystemView& system, int batch,
                           View<const float> d, View<float> u, View<float> q,
                           const RegularizerFold& fold, View<const float> g, View<float> e,
                           View<CgnrScalars> scalars, View<const float> x, View<float> fx,
                           View<const float> d_cache)
{
    const bool regularized = fold.terms.count > 0;
    const View<const float> u_in{u.data, u.size};
    const auto* sys = std::get_if<Parallel2dView>(&system);
    if (sys == nullptr || rows_of(*sys) == 0 || cols_of(*sys) == 0) {
        normal(exec, system, batch, d.data, u.data, q.data, Accumulation::automatic);
        if (regularized) {
            RegularizerFold at_u = fold;
            at_u.base = u_in;
            cuda::cgnr_step_dots_folded(exec, batch, at_u, d, g, e, scalars, x, fx);
        } else {
            cuda::cgnr_step_dots(exec, batch, d, u_in, g, scalars);
        }
        return;
    }
    if (batch > max_frames) {
        throw std::invalid_argument{"CUDA reductions support at most " +
                                    std::to_string(max_frames) + " frames per call, found " +
                                    std::to_string(batch)};
    }
    // The dot step in the adjoint's epilogue, on each pixel's u as it is
    // stored (cgnr_ops.cuh: the same operations as cgnr_step_dots(_folded)).
    const StepDotsAt step = step_dots_at(fold, batch, d, g, e, scalars, x, fx);
    // A slot per frame and block of the adjoint's largest grid (a tile per
    // block; mirrored tiles take half as many blocks).
    const dim3 grid = adjoint_blocks(*sys, false);
    const ReductionScratch sums =
        reduction_scratch(exec, batch, static_cast<long long>(grid.x) * grid.y);
    const float* forward = parallel2d_forward_for_normal(
        exec, *sys, batch, d.data, q.data, reinterpret_cast<const float2*>(d_cache.data));
    parallel2d_adjoint(exec, *sys, batch, forward, u.data, [&](int first) {
        return p2::ReduceEpilogue<StepDotsAt>{step, sums, first};
    });
}

// --- the direction's pair images ------------------------------------------------------

namespace {

/// The parallel-beam system whose single-frame rays may read a kept copy
/// of d as pair images: a batch that goes a frame at a time (fewer than 4).
/// Whether the rays take them (lines_plan<1>, RECON_PARALLEL2D_RAYS) is
/// decided per call; a kept copy is valid either way.
const Parallel2dView* pair_layout(const SystemView& system, int batch)
{
    const auto* sys = std::get_if<Parallel2dView>(&system);
    if (sys == nullptr || batch >= 4 || rows_of(*sys) == 0 || cols_of(*sys) == 0) return nullptr;
    return sys;
}

/// The system of a non-empty cache, checked against the pair images' size.
const Parallel2dView& cached_system(const SystemView& system, int batch, size_type size)
{
    const Parallel2dView* sys = pair_layout(system, batch);
    const size_type want = sys != nullptr ? 2 * p2::pair_frame_size(*sys) * batch : 0;
    if (sys == nullptr || size != want) {
        throw std::invalid_argument{"direction cache of " + std::to_string(size) +
                                    " floats, the system keeps " + std::to_string(want)};
    }
    return *sys;
}

}  // namespace

size_type direction_cache_size(const Executor& exec, const SystemView& system, int batch)
{
    // Kept only where the rays read it (not when single frames take the
    // staged lines).
    const Parallel2dView* sys = pair_layout(system, batch);
    if (sys == nullptr || lines_plan<1>(exec, *sys)) return 0;
    return 2 * p2::pair_frame_size(*sys) * batch;
}

void direction_cache_fill(const Executor& exec, const SystemView& system, int batch,
                          View<const float> d, View<float> cache)
{
    if (cache.size == 0) return;
    const Parallel2dView& sys = cached_system(system, batch, cache.size);
    p2::parallel2d_pairs_kernel<<<image_tiles(sys, batch), dim3{p2::pair_tile, p2::pair_tile}, 0,
                                  stream_of(exec)>>>(sys, d.data,
                                                     reinterpret_cast<float2*>(cache.data));
    RECON_CUDA_CHECK_LAUNCH();
}

namespace {

/// parallel2d_step_kernel as one cooperative launch, or false where it
/// cannot run (launch_cooperative).
template <bool WithState>
bool launch_step(const Executor& exec, const Parallel2dView& sys, const CgnrParams& params,
                 int batch, const StepVectors& vectors, CgnrScalars* scalars,
                 const RegularizerPrepare& prepare)
{
    const dim3 grid = image_tiles(sys, batch), block{p2::pair_tile, p2::pair_tile};
    const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
    auto* partials = static_cast<double2*>(
        scratch(exec, ScratchSlot::block_sums, sizeof(double2) * blocks, false));
    return launch_cooperative(exec, p2::parallel2d_step_kernel<WithState>, grid, block, 0, sys,
                              params, batch, vectors, scalars, prepare, partials);
}

}  // namespace

void cgnr_step_update_direction(const Executor& exec, const SystemView& system,
                                const CgnrParams& params, int batch, View<float> d,
                                View<const float> u, View<const float> e, View<const float> fx,
                                View<float> x, View<float> h, View<float> g, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    if (step_launch() != StepLaunch::split) {
        const StepVectors vectors{u.data, e.data, fx.data, d.data, x.data, h.data, g.data,
                                  reinterpret_cast<float2*>(cache.data)};
        if (cache.size == 0) {
            // Any system without a kept copy of d: the flat cooperative step.
            if (launch_update_direction(exec, params, batch, d.size / batch, vectors,
                                        scalars.data, prepare)) {
                return;
            }
        } else {
            const Parallel2dView& sys = cached_system(system, batch, cache.size);
            const bool launched =
                prepare.terms.count > 0
                    ? launch_step<true>(exec, sys, params, batch, vectors, scalars.data, prepare)
                    : launch_step<false>(exec, sys, params, batch, vectors, scalars.data, prepare);
            if (launched) return;
        }
    }
    cuda::cgnr_step_update_beta(exec, params, batch, View<const float>{d.data, d.size}, u, e, fx,
                                x, h, g, scalars);
    cuda::cgnr_step_direction_cached(exec, system, batch, View<const float>{g.data, g.size}, d,
                                     cache, scalars, prepare);
}

namespace {

/// Whether p2::parallel2d_adjoint_kernel<1, Epilogue, mirrored, tabled>
/// runs for one frame of `sys` as one cooperative launch: its tiles
/// mirrored, the system's views table, every block resident at once.
template <class Epilogue>
bool whole_step_adjoint_fits(const Executor& exec, const Parallel2dView& sys)
{
    if (!parallel2d_adjoint_mirrored(sys) || sys.adjoint_views == nullptr) return false;
    auto kernel = p2::parallel2d_adjoint_kernel<1, Epilogue, true, true>;
    constexpr std::size_t bytes =
        p2::adjoint_shared_bytes<1, true> + p2::adjoint_epilogue_bytes<Epilogue>();
    const dim3 grid = adjoint_blocks(sys, true);
    allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), bytes);
    return cooperative_fits(exec, reinterpret_cast<const void*>(kernel),
                            p2::adjoint_threads<1, true>, static_cast<long long>(grid.x) * grid.y,
                            bytes);
}

/// Queues that launch (whole_step_adjoint_fits holds) of y into x.
template <class Epilogue>
void launch_whole_step_adjoint(const Executor& exec, const Parallel2dView& sys, const float* y,
                               float* x, const Epilogue& epilogue)
{
    auto kernel = p2::parallel2d_adjoint_kernel<1, Epilogue, true, true>;
    constexpr std::size_t bytes =
        p2::adjoint_shared_bytes<1, true> + p2::adjoint_epilogue_bytes<Epilogue>();
    const bool launched = launch_cooperative(exec, kernel, adjoint_blocks(sys, true),
                                             dim3{p2::adjoint_threads<1, true>}, bytes, sys, y, x,
                                             epilogue);
    if (!launched) throw std::logic_error{"the adjoint's cooperative launch was not probed"};
}

/// Scratch for `count` double2 block sums per block of the mirrored adjoint.
double2* whole_step_sums(const Executor& exec, const Parallel2dView& sys, int count)
{
    const dim3 grid = adjoint_blocks(sys, true);
    const std::size_t blocks = static_cast<std::size_t>(grid.x) * grid.y;
    return static_cast<double2*>(
        scratch(exec, ScratchSlot::block_sums, count * sizeof(double2) * blocks, false));
}

/// The forward product, then the mirrored adjoint of one frame with
/// p2::StepEpilogue as one cooperative launch, compiled for the system's
/// views table (Tabled) and the terms' Shape; false, and nothing queued,
/// where the adjoint takes a tile per block (p2::StepEpilogue says why),
/// the system has no views table (an image or view count beyond
/// parallel2d_table_max_bytes) or its blocks cannot all be resident at
/// once. `forward()` queues A d and returns where it is. Refresh: the
/// launch back-projects `refresh_y` = A x_k − b first and steps from h_k =
/// Aᵀ(A x_k − b) (cgnr_step_replacement).
template <bool WithState, class Shape, bool Refresh, class Forward>
bool launch_one_pass(const Executor& exec, const Parallel2dView& sys, const CgnrParams& params,
                     const StepDotsAt& op, const StepVectors& w, const RegularizerPrepare& prepare,
                     Forward&& forward, const float* refresh_y)
{
    using Step = p2::StepEpilogue<WithState, Shape, Refresh>;
    if (!whole_step_adjoint_fits<Step>(exec, sys)) return false;
    // three pairs of sums per block, then one more where the expansion cancels
    double2* const partials = whole_step_sums(exec, sys, 4);
    const dim3 grid = adjoint_blocks(sys, true);
    const long long blocks = static_cast<long long>(grid.x) * grid.y;
    const float* q = forward();
    float* const no_output = nullptr;  // the step keeps u in registers (its scratch)
    launch_whole_step_adjoint(
        exec, sys, q, no_output,
        Step{op, params, w, prepare, partials, partials + 3 * blocks, refresh_y});
    return true;
}

/// cgnr_step_one_pass's two launches where they run (one frame that keeps a
/// copy of d, the state's image x, the fewest launches): launch_one_pass
/// compiled for the terms at hand, with `forward`, Refresh and `refresh_y`
/// as there; false, and nothing queued, where they do not.
template <bool Refresh, class Forward>
bool one_pass_launched(const Executor& exec, const SystemView& system, const CgnrParams& params,
                       int batch, View<float> d, View<float> u, const RegularizerFold& fold,
                       View<float> e, View<float> fx, View<float> x, View<float> h,
                       View<float> g, View<float> cache, View<CgnrScalars> scalars,
                       const RegularizerPrepare& prepare, Forward&& forward,
                       const float* refresh_y = nullptr)
{
    const auto in = [](View<float> v) { return View<const float>{v.data, v.size}; };
    // (The adjoint's step forms the state from its own x_{k+1}: the state's
    // image must be x, as the solver passes it.)
    const bool state_of_x = prepare.terms.count == 0 || prepare.p.data == x.data;
    if (batch != 1 || cache.size == 0 || !state_of_x || step_launch() != StepLaunch::fewest) {
        return false;
    }
    const Parallel2dView& sys = cached_system(system, batch, cache.size);
    const bool regularized = fold.terms.count > 0;
    const StepDotsAt op = step_dots_at(fold, batch, in(d), in(g), e, scalars, in(x), fx);
    const StepVectors w{u.data, e.data, regularized ? fx.data : nullptr, d.data, x.data,
                        h.data, g.data, reinterpret_cast<float2*>(cache.data)};
    const auto one_tv = [](const RegularizerTerms& t) {
        return t.count == 1 && t.term[0].kind == RegularizerKind::tv;
    };
    if (!regularized) {
        return launch_one_pass<false, AnyTerms, Refresh>(exec, sys, params, op, w, prepare,
                                                         forward, refresh_y);
    }
    if (one_tv(fold.terms) && one_tv(prepare.terms)) {
        // the configs' regularizer, compiled apart (stencils.hpp's OneTerm;
        // p2::StepEpilogue says what it gains)
        return launch_one_pass<true, OneTerm<RegularizerKind::tv>, Refresh>(
            exec, sys, params, op, w, prepare, forward, refresh_y);
    }
    return launch_one_pass<true, AnyTerms, Refresh>(exec, sys, params, op, w, prepare, forward,
                                                    refresh_y);
}

}  // namespace

void cgnr_step_one_pass(const Executor& exec, const SystemView& system, const CgnrParams& params,
                        int batch, View<float> d, View<float> u, const RegularizerFold& fold,
                        View<float> e, View<float> fx, View<float> x, View<float> h,
                        View<float> g, View<float> cache, View<CgnrScalars> scalars,
                        const RegularizerPrepare& prepare)
{
    const auto in = [](View<float> v) { return View<const float>{v.data, v.size}; };
    const auto rays_of_d = [&] {
        const Parallel2dView& sys = cached_system(system, batch, cache.size);
        const auto* d_pairs = reinterpret_cast<const float2*>(cache.data);
        return parallel2d_forward_for_normal(exec, sys, 1, d.data, nullptr, d_pairs);
    };
    if (one_pass_launched<false>(exec, system, params, batch, d, u, fold, e, fx, x, h, g, cache,
                                 scalars, prepare, rays_of_d)) {
        return;
    }
    cuda::cgnr_step_normal_dots(exec, system, batch, in(d), u, {}, fold, in(g), e, scalars, in(x),
                                fx, in(cache));
    cuda::cgnr_step_update_direction(exec, system, params, batch, d, in(u), in(e), in(fx), x, h, g,
                                     cache, scalars, prepare);
}

void cgnr_step_replacement(const Executor& exec, const SystemView& system,
                           const CgnrParams& params, int batch, View<float> d, View<float> u,
                           const RegularizerFold& fold, View<float> e, View<float> fx,
                           View<float> x, View<const float> b, View<float> r, View<float> h,
                           View<float> g, View<float> cache, View<CgnrScalars> scalars,
                           const RegularizerPrepare& prepare)
{
    const auto in = [](View<float> v) { return View<const float>{v.data, v.size}; };
    // Where the one-pass step runs as its two launches: x_k's pair images,
    // then one walk of the rays for A d and A x_k − b together, and the
    // step's adjoint, which back-projects r and then A d.
    const auto rays_of_d_and_x = [&] {
        const Parallel2dView& sys = cached_system(system, batch, cache.size);
        const cudaStream_t stream = stream_of(exec);
        float* q = nullptr;
        float2* x_pairs = nullptr;
        measurement_scratch(exec, sys, &q, &x_pairs);
        launch_pairs(sys, stream, x.data, 1, x_pairs);
        launch_rays<1, float, true>(sys, stream, reinterpret_cast<const float2*>(cache.data),
                                    nullptr, q, p2::ResidualRays{x_pairs, b.data, r.data});
        return static_cast<const float*>(q);
    };
    if (one_pass_launched<true>(exec, system, params, batch, d, u, fold, e, fx, x, h, g, cache,
                                scalars, prepare, rays_of_d_and_x, r.data)) {
        return;
    }
    cuda::residual(exec, system, batch, in(x), b, r);
    cuda::apply_adjoint(exec, system, batch, in(r), h);
    cuda::cgnr_step_one_pass(exec, system, params, batch, d, u, fold, e, fx, x, h, g, cache,
                             scalars, prepare);
}

void cgnr_step_direction_cached(const Executor& exec, const SystemView& system, int batch,
                                View<const float> g, View<float> d, View<float> cache,
                                View<CgnrScalars> scalars, const RegularizerPrepare& prepare)
{
    const bool regularized = prepare.terms.count > 0;
    if (cache.size == 0) {
        if (regularized) {
            cuda::cgnr_step_direction_folded(exec, batch, g, d, scalars, prepare);
        } else {
            cuda::cgnr_step_direction(exec, batch, g, d, scalars);
        }
        return;
    }
    const Parallel2dView& sys = cached_system(system, batch, cache.size);
    auto* pairs = reinterpret_cast<float2*>(cache.data);
    const dim3 grid = image_tiles(sys, batch), block{p2::pair_tile, p2::pair_tile};
    if (regularized) {
        p2::parallel2d_direction_kernel<true><<<grid, block, 0, stream_of(exec)>>>(
            sys, batch, g.data, d.data, pairs, scalars.data, prepare);
    } else {
        p2::parallel2d_direction_kernel<false><<<grid, block, 0, stream_of(exec)>>>(
            sys, batch, g.data, d.data, pairs, scalars.data, prepare);
    }
    RECON_CUDA_CHECK_LAUNCH();
}

}  // namespace recon::kernels::cuda

namespace recon::kernels {

void apply_shared_x(const Executor& exec, const SystemView& system, View<const float> x,
                    View<float> y)
{
    std::visit(
        [&](const auto& sys) {
            using System = std::decay_t<decltype(sys)>;
            if constexpr (std::is_same_v<System, Parallel2dView>) {
                throw std::invalid_argument{"apply_shared_x: not for parallel2d"};
            } else {
                const index_t m = rows_of(sys);
                const index_t n = cols_of(sys);
                const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
                if (bytes > cuda::max_shared_image) {
                    throw std::invalid_argument{"apply_shared_x: the image does not fit"};
                }
                auto kernel = cuda::apply_rows_shared_x_kernel<System>;
                cuda::allow_dynamic_shared(exec, reinterpret_cast<const void*>(kernel), bytes);
                kernel<<<cuda::blocks_for(m, 512, 4LL * cuda::sm_count(exec)), 512, bytes,
                         cuda::stream_of(exec)>>>(sys, m, n, x.data, y.data);
                RECON_CUDA_CHECK_LAUNCH();
            }
        },
        system);
}

void apply_adjoint_accumulating(const Executor& exec, const SystemView& system, int batch,
                                View<const float> y, View<float> x, Accumulation how)
{
    cuda::adjoint(exec, system, batch, y.data, x.data, how);
}

void normal_apply_accumulating(const Executor& exec, const SystemView& system, int batch,
                               View<const float> d, View<float> u, View<float> q,
                               Accumulation how)
{
    cuda::normal(exec, system, batch, d.data, u.data, q.data, how);
}

}  // namespace recon::kernels
