#pragma once
// What `recon bench` compares our kernels against, and the kernel variants
// of the founding paper's Table 2 (CUDA builds; without CUDA every entry
// throws "this build has no CUDA backend").
//
// - Variants of A x and Aᵀ y beyond the primitives' defaults: x staged in
//   shared memory, and the choice of how Aᵀ y accumulates.
// - cuSPARSE CSR SpMV for A x and Aᵀ y (Aᵀ stored as its own CSR, built
//   once with csr2csc, as cuSPARSE's documentation suggests for repeated
//   transposed products).
// - CGLS written with cuSPARSE SpMV and cuBLAS dot / axpy / scal, run with a
//   host loop (dot results to the host: cuBLAS host pointer mode) or with all
//   iterations captured in one CUDA graph (device pointer mode, α and β
//   formed by two one-thread kernels).

#include <functional>
#include <memory>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/executor.hpp"
#include "kernels/system_views.hpp"

namespace recon::kernels {

/// How the row kernels accumulate Aᵀ y: a per-block image in shared memory
/// when it fits (automatic, the primitives' choice), always red.global.add,
/// or always shared memory (throws if the image does not fit).
enum class Accumulation { automatic, global_atomics, shared_memory };

/// y = A x for one frame, with x staged in shared memory per block (the
/// founding paper's shared-memory variant). Stored and synthetic models;
/// throws if n floats do not fit in shared memory.
void apply_shared_x(const Executor& exec, const SystemView& system, View<const float> x,
                    View<float> y);

/// x = Aᵀ y (overwrites x) with the given accumulation.
void apply_adjoint_accumulating(const Executor& exec, const SystemView& system, int batch,
                                View<const float> y, View<float> x, Accumulation how);

/// u = Aᵀ(A d) (q = A d when q.data is set) with the given accumulation.
void normal_apply_accumulating(const Executor& exec, const SystemView& system, int batch,
                               View<const float> d, View<float> u, View<float> q,
                               Accumulation how);

/// A CSR matrix in host memory (borrowed: the caller keeps it alive during
/// construction of the classes below, which copy it).
struct HostCsr {
    index_t rows = 0;
    index_t cols = 0;
    const size_type* row_ptr = nullptr;  // rows + 1
    const index_t* col_idx = nullptr;
    const float* values = nullptr;
};

/// A and Aᵀ on the device as cuSPARSE CSR matrices, with SpMV buffers.
/// Move-only; every call is queued on exec.stream().
class CusparseCsr {
public:
    CusparseCsr(const Executor& exec, const HostCsr& matrix);
    ~CusparseCsr();
    CusparseCsr(CusparseCsr&&) noexcept;
    CusparseCsr& operator=(CusparseCsr&&) noexcept;

    /// y = A x (x: n floats, y: m floats, device memory).
    void apply(View<const float> x, View<float> y);
    /// x = Aᵀ y through the stored transpose.
    void apply_adjoint(View<const float> y, View<float> x);
    /// x = Aᵀ y through cuSPARSE's transposed operation on A itself.
    void apply_adjoint_op_transpose(View<const float> y, View<float> x);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

/// Textbook CGLS (no regularizer) with cuSPARSE and cuBLAS, for one frame:
///   r = b − A x; s = Aᵀ r; p = s; γ = ‖s‖²
///   repeat: q = A p; α = γ / ‖q‖²; x += α p; r −= α q; s = Aᵀ r;
///           γ' = ‖s‖²; β = γ' / γ; p = s + β p
/// b and x are device buffers owned by this object.
class CusparseCgls {
public:
    CusparseCgls(const Executor& exec, const HostCsr& matrix);
    ~CusparseCgls();
    CusparseCgls(CusparseCgls&&) noexcept;
    CusparseCgls& operator=(CusparseCgls&&) noexcept;

    View<float> input();  // b, m floats
    View<float> image();  // x, n floats: the solution (a solve starts from x = 0)

    /// `iterations` iterations from x = 0 with a host loop (synchronizes every dot).
    void solve_host_loop(int iterations);
    /// The same as one graph launch; the graph is captured on the first
    /// call for this iteration count. Queued on the stream, no host sync.
    void solve_graph(int iterations);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

/// A CUDA stream owned for the bench (created non-blocking, destroyed with
/// the object). Move-only.
class BenchStream {
public:
    explicit BenchStream(int device);
    ~BenchStream();
    BenchStream(BenchStream&& other) noexcept;
    BenchStream& operator=(BenchStream&&) = delete;
    BenchStream(const BenchStream&) = delete;
    CUstream_st* get() const { return stream_; }

private:
    CUstream_st* stream_ = nullptr;
};

/// Milliseconds between CUDA events recorded on the first executor's stream
/// around `work`, with every other executor's stream joined in (they wait
/// for the start event, the stop event waits for them), so work spread over
/// several streams is timed as a whole. Synchronizes.
double time_on_device_ms(const std::vector<Executor>& streams, const std::function<void()>& work);

}  // namespace recon::kernels
