// The library baselines of `recon bench`: cuSPARSE CSR SpMV and a textbook
// CGLS over cuSPARSE + cuBLAS, used as their documentation shows (generic
// SpMV API with an external buffer and preprocessing, cuBLAS level-1 calls;
// device pointer mode and a user workspace for graph capture).

#include <cublas_v2.h>
#include <cusparse.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/baselines.hpp"
#include "kernels/memory.hpp"
#include "launch.cuh"

namespace recon::kernels {
namespace {

void check(cusparseStatus_t status, const char* what)
{
    if (status != CUSPARSE_STATUS_SUCCESS) {
        throw std::runtime_error{std::string{"cuSPARSE error in "} + what + ": " +
                                 cusparseGetErrorString(status)};
    }
}

void check(cublasStatus_t status, const char* what)
{
    if (status != CUBLAS_STATUS_SUCCESS) {
        throw std::runtime_error{std::string{"cuBLAS error in "} + what + ": " +
                                 std::to_string(static_cast<int>(status))};
    }
}

#define RECON_LIB_TRY(expr) check((expr), #expr)

/// An SpMV y = op(M) x bound to one matrix, with its buffer preprocessed.
struct Spmv {
    cusparseSpMatDescr_t matrix = nullptr;
    cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    cusparseDnVecDescr_t in = nullptr;
    cusparseDnVecDescr_t out = nullptr;
    Array<unsigned char> buffer;
};

}  // namespace

struct CusparseCsr::Impl {
    Executor exec;
    index_t rows = 0, cols = 0;
    cusparseHandle_t handle = nullptr;
    Array<int> row_ptr, col_idx, t_row_ptr, t_col_idx;
    Array<float> values, t_values;
    cusparseSpMatDescr_t a = nullptr, at = nullptr;
    Spmv forward, adjoint, adjoint_op;
    float one = 1.0f, zero = 0.0f;

    Impl(const Executor& e, const HostCsr& m) : exec{e}, rows{m.rows}, cols{m.cols}
    {
        const size_type nnz = m.row_ptr[m.rows];
        if (nnz >= (size_type{1} << 31)) {
            throw std::invalid_argument{"cuSPARSE baseline: more than 2^31 nonzeros"};
        }
        std::vector<int> rp(m.row_ptr, m.row_ptr + m.rows + 1);
        row_ptr = Array<int>{exec, rp};
        col_idx = Array<int>{exec, std::vector<int>(m.col_idx, m.col_idx + nnz)};
        values = Array<float>{exec, std::vector<float>(m.values, m.values + nnz)};
        t_row_ptr = Array<int>{exec, static_cast<size_type>(cols) + 1};
        t_col_idx = Array<int>{exec, std::max<size_type>(nnz, 1)};
        t_values = Array<float>{exec, std::max<size_type>(nnz, 1)};
        RECON_LIB_TRY(cusparseCreate(&handle));
        RECON_LIB_TRY(cusparseSetStream(handle, cuda::stream_of(exec)));

        // Aᵀ as its own CSR (= the CSC of A).
        std::size_t bytes = 0;
        RECON_LIB_TRY(cusparseCsr2cscEx2_bufferSize(
            handle, rows, cols, static_cast<int>(nnz), values.data(), row_ptr.data(),
            col_idx.data(), t_values.data(), t_row_ptr.data(), t_col_idx.data(), CUDA_R_32F,
            CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, &bytes));
        Array<unsigned char> work{exec, static_cast<size_type>(std::max<std::size_t>(bytes, 1))};
        RECON_LIB_TRY(cusparseCsr2cscEx2(
            handle, rows, cols, static_cast<int>(nnz), values.data(), row_ptr.data(),
            col_idx.data(), t_values.data(), t_row_ptr.data(), t_col_idx.data(), CUDA_R_32F,
            CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, work.data()));
        exec.synchronize();

        RECON_LIB_TRY(cusparseCreateCsr(&a, rows, cols, nnz, row_ptr.data(), col_idx.data(),
                                        values.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                        CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        RECON_LIB_TRY(cusparseCreateCsr(&at, cols, rows, nnz, t_row_ptr.data(), t_col_idx.data(),
                                        t_values.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                        CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        prepare(forward, a, CUSPARSE_OPERATION_NON_TRANSPOSE, cols, rows);
        prepare(adjoint, at, CUSPARSE_OPERATION_NON_TRANSPOSE, rows, cols);
        prepare(adjoint_op, a, CUSPARSE_OPERATION_TRANSPOSE, rows, cols);
    }

    /// Descriptors over scratch vectors of the right sizes (rebound to the
    /// caller's vectors on each call), the buffer, and the preprocessing.
    void prepare(Spmv& s, cusparseSpMatDescr_t matrix, cusparseOperation_t op, index_t in_size,
                 index_t out_size)
    {
        s.matrix = matrix;
        s.op = op;
        Array<float> x{exec, in_size}, y{exec, out_size};
        RECON_LIB_TRY(cusparseCreateDnVec(&s.in, in_size, x.data(), CUDA_R_32F));
        RECON_LIB_TRY(cusparseCreateDnVec(&s.out, out_size, y.data(), CUDA_R_32F));
        std::size_t bytes = 0;
        RECON_LIB_TRY(cusparseSpMV_bufferSize(handle, op, &one, matrix, s.in, &zero, s.out,
                                              CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, &bytes));
        s.buffer = Array<unsigned char>{exec, static_cast<size_type>(std::max<std::size_t>(bytes, 1))};
        // Optional speed-up for repeated products; not every operation has one.
        cusparseSpMV_preprocess(handle, op, &one, matrix, s.in, &zero, s.out, CUDA_R_32F,
                                CUSPARSE_SPMV_CSR_ALG1, s.buffer.data());
        exec.synchronize();
    }

    void run(Spmv& s, const float* in, float* out)
    {
        RECON_LIB_TRY(cusparseDnVecSetValues(s.in, const_cast<float*>(in)));
        RECON_LIB_TRY(cusparseDnVecSetValues(s.out, out));
        RECON_LIB_TRY(cusparseSpMV(handle, s.op, &one, s.matrix, s.in, &zero, s.out, CUDA_R_32F,
                                   CUSPARSE_SPMV_CSR_ALG1, s.buffer.data()));
    }

    ~Impl()
    {
        for (Spmv* s : {&forward, &adjoint, &adjoint_op}) {
            if (s->in != nullptr) cusparseDestroyDnVec(s->in);
            if (s->out != nullptr) cusparseDestroyDnVec(s->out);
        }
        if (a != nullptr) cusparseDestroySpMat(a);
        if (at != nullptr) cusparseDestroySpMat(at);
        if (handle != nullptr) cusparseDestroy(handle);
    }
};

CusparseCsr::CusparseCsr(const Executor& exec, const HostCsr& matrix)
    : impl_{std::make_unique<Impl>(exec, matrix)}
{}
CusparseCsr::~CusparseCsr() = default;
CusparseCsr::CusparseCsr(CusparseCsr&&) noexcept = default;
CusparseCsr& CusparseCsr::operator=(CusparseCsr&&) noexcept = default;

void CusparseCsr::apply(View<const float> x, View<float> y)
{
    impl_->run(impl_->forward, x.data, y.data);
}
void CusparseCsr::apply_adjoint(View<const float> y, View<float> x)
{
    impl_->run(impl_->adjoint, y.data, x.data);
}
void CusparseCsr::apply_adjoint_op_transpose(View<const float> y, View<float> x)
{
    impl_->run(impl_->adjoint_op, y.data, x.data);
}

// --- CGLS ----------------------------------------------------------------------------

namespace {

/// Device scalars of the graph form: α = γ/δ, −α, β = γ'/γ, γ = γ'.
struct CglsScalars {
    float gamma, delta, gamma_new, alpha, neg_alpha, beta, one;
};

__global__ void alpha_kernel(CglsScalars* s)
{
    s->alpha = s->gamma / s->delta;
    s->neg_alpha = -s->alpha;
}

__global__ void beta_kernel(CglsScalars* s)
{
    s->beta = s->gamma_new / s->gamma;
    s->gamma = s->gamma_new;
}

}  // namespace

struct CusparseCgls::Impl {
    Executor exec;
    CusparseCsr a;
    index_t m, n;
    cublasHandle_t blas = nullptr;
    Array<unsigned char> blas_workspace;
    Array<float> b, x, r, s, p, q;
    Array<CglsScalars> scalars;
    std::map<int, std::pair<cudaGraph_t, cudaGraphExec_t>> graphs;

    Impl(const Executor& e, const HostCsr& matrix)
        : exec{e}, a{e, matrix}, m{matrix.rows}, n{matrix.cols}, b{e, m}, x{e, n}, r{e, m},
          s{e, n}, p{e, n}, q{e, m}
    {
        RECON_LIB_TRY(cublasCreate(&blas));
        RECON_LIB_TRY(cublasSetStream(blas, cuda::stream_of(exec)));
        // A user workspace keeps cuBLAS from allocating during graph capture.
        blas_workspace = Array<unsigned char>{exec, 4 << 20};
        RECON_LIB_TRY(cublasSetWorkspace(blas, blas_workspace.data(), 4 << 20));
        CglsScalars init{};
        init.one = 1.0f;
        scalars = Array<CglsScalars>{exec, std::vector<CglsScalars>{init}};
        exec.synchronize();
    }

    ~Impl()
    {
        for (auto& [k, g] : graphs) {
            cudaGraphExecDestroy(g.second);
            cudaGraphDestroy(g.first);
        }
        if (blas != nullptr) cublasDestroy(blas);
    }

    View<const float> c(const Array<float>& v) { return {v.data(), v.size()}; }

    /// x = 0;  r = b;  s = Aᵀ r   (CGLS from x0 = 0, as the bench's solves
    /// of ours start: no A x0)
    void start_from_zero()
    {
        RECON_CUDA_TRY(cudaMemsetAsync(x.data(), 0, x.size() * sizeof(float),
                                       cuda::stream_of(exec)));
        RECON_LIB_TRY(cublasScopy(blas, m, b.data(), 1, r.data(), 1));
        a.apply_adjoint(c(r), s.view());
    }

    void host_loop(int iterations)
    {
        RECON_LIB_TRY(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST));
        const float one = 1.0f;
        start_from_zero();
        RECON_LIB_TRY(cublasScopy(blas, n, s.data(), 1, p.data(), 1));
        float gamma = 0.0f;
        RECON_LIB_TRY(cublasSdot(blas, n, s.data(), 1, s.data(), 1, &gamma));
        for (int k = 0; k < iterations; ++k) {
            a.apply(c(p), q.view());  // q = A p
            float delta = 0.0f;
            RECON_LIB_TRY(cublasSdot(blas, m, q.data(), 1, q.data(), 1, &delta));
            const float alpha = gamma / delta, neg_alpha = -alpha;
            RECON_LIB_TRY(cublasSaxpy(blas, n, &alpha, p.data(), 1, x.data(), 1));
            RECON_LIB_TRY(cublasSaxpy(blas, m, &neg_alpha, q.data(), 1, r.data(), 1));
            a.apply_adjoint(c(r), s.view());  // s = Aᵀ r
            float gamma_new = 0.0f;
            RECON_LIB_TRY(cublasSdot(blas, n, s.data(), 1, s.data(), 1, &gamma_new));
            const float beta = gamma_new / gamma;
            gamma = gamma_new;
            RECON_LIB_TRY(cublasSscal(blas, n, &beta, p.data(), 1));  // p = s + β p
            RECON_LIB_TRY(cublasSaxpy(blas, n, &one, s.data(), 1, p.data(), 1));
        }
    }

    /// The same iteration with every scalar on the device, for capture.
    void device_loop(int iterations)
    {
        RECON_LIB_TRY(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE));
        CglsScalars* sc = scalars.data();
        const cudaStream_t stream = cuda::stream_of(exec);
        start_from_zero();
        RECON_LIB_TRY(cublasScopy(blas, n, s.data(), 1, p.data(), 1));
        RECON_LIB_TRY(cublasSdot(blas, n, s.data(), 1, s.data(), 1, &sc->gamma));
        for (int k = 0; k < iterations; ++k) {
            a.apply(c(p), q.view());
            RECON_LIB_TRY(cublasSdot(blas, m, q.data(), 1, q.data(), 1, &sc->delta));
            alpha_kernel<<<1, 1, 0, stream>>>(sc);
            RECON_CUDA_CHECK_LAUNCH();
            RECON_LIB_TRY(cublasSaxpy(blas, n, &sc->alpha, p.data(), 1, x.data(), 1));
            RECON_LIB_TRY(cublasSaxpy(blas, m, &sc->neg_alpha, q.data(), 1, r.data(), 1));
            a.apply_adjoint(c(r), s.view());
            RECON_LIB_TRY(cublasSdot(blas, n, s.data(), 1, s.data(), 1, &sc->gamma_new));
            beta_kernel<<<1, 1, 0, stream>>>(sc);
            RECON_CUDA_CHECK_LAUNCH();
            RECON_LIB_TRY(cublasSscal(blas, n, &sc->beta, p.data(), 1));
            RECON_LIB_TRY(cublasSaxpy(blas, n, &sc->one, s.data(), 1, p.data(), 1));
        }
    }

    void graph(int iterations)
    {
        auto it = graphs.find(iterations);
        if (it == graphs.end()) {
            const cudaStream_t stream = cuda::stream_of(exec);
            cudaGraph_t g = nullptr;
            RECON_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
            try {
                device_loop(iterations);
            } catch (...) {
                cudaStreamEndCapture(stream, &g);
                if (g != nullptr) cudaGraphDestroy(g);
                throw;
            }
            RECON_CUDA_TRY(cudaStreamEndCapture(stream, &g));
            cudaGraphExec_t instance = nullptr;
            RECON_CUDA_TRY(cudaGraphInstantiate(&instance, g, 0));
            it = graphs.emplace(iterations, std::pair{g, instance}).first;
        }
        RECON_CUDA_TRY(cudaGraphLaunch(it->second.second, cuda::stream_of(exec)));
    }
};

CusparseCgls::CusparseCgls(const Executor& exec, const HostCsr& matrix)
    : impl_{std::make_unique<Impl>(exec, matrix)}
{}
CusparseCgls::~CusparseCgls() = default;
CusparseCgls::CusparseCgls(CusparseCgls&&) noexcept = default;
CusparseCgls& CusparseCgls::operator=(CusparseCgls&&) noexcept = default;
View<float> CusparseCgls::input() { return impl_->b.view(); }
View<float> CusparseCgls::image() { return impl_->x.view(); }
void CusparseCgls::solve_host_loop(int iterations) { impl_->host_loop(iterations); }
void CusparseCgls::solve_graph(int iterations) { impl_->graph(iterations); }

// --- timing ----------------------------------------------------------------------

BenchStream::BenchStream(int device)
{
    RECON_CUDA_TRY(cudaSetDevice(device));
    cudaStream_t s = nullptr;
    RECON_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_ = s;
}

BenchStream::~BenchStream()
{
    if (stream_ != nullptr) RECON_CUDA_TRY_NOTHROW(cudaStreamDestroy(stream_));
}

BenchStream::BenchStream(BenchStream&& other) noexcept : stream_{other.stream_}
{
    other.stream_ = nullptr;
}

namespace {
/// Owns one CUDA event.
class Event {
public:
    Event() { RECON_CUDA_TRY(cudaEventCreate(&event_)); }
    ~Event() { RECON_CUDA_TRY_NOTHROW(cudaEventDestroy(event_)); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    cudaEvent_t get() const { return event_; }

private:
    cudaEvent_t event_ = nullptr;
};
}  // namespace

double time_on_device_ms(const std::vector<Executor>& streams, const std::function<void()>& work)
{
    if (streams.empty()) throw std::invalid_argument{"time_on_device_ms: no stream"};
    const cudaStream_t main = cuda::stream_of(streams.front());
    Event start, stop;
    std::vector<Event> joins(streams.size());
    RECON_CUDA_TRY(cudaEventRecord(start.get(), main));
    for (std::size_t i = 1; i < streams.size(); ++i) {
        RECON_CUDA_TRY(cudaStreamWaitEvent(cuda::stream_of(streams[i]), start.get(), 0));
    }
    work();
    for (std::size_t i = 1; i < streams.size(); ++i) {
        RECON_CUDA_TRY(cudaEventRecord(joins[i].get(), cuda::stream_of(streams[i])));
        RECON_CUDA_TRY(cudaStreamWaitEvent(main, joins[i].get(), 0));
    }
    RECON_CUDA_TRY(cudaEventRecord(stop.get(), main));
    RECON_CUDA_TRY(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    RECON_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return ms;
}

}  // namespace recon::kernels
