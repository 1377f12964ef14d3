// A whole solve as one launch: a captured CUDA graph with a conditional
// WHILE loop, or the persistent cooperative kernel.

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/graph.hpp"
#include "kernels/memory.hpp"
#include "launch.cuh"
#include "persistent.cuh"

namespace recon::kernels {
namespace {

/// condition = any frame still running (one thread: a batch is small).
__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, const CgnrScalars* s,
                                     int batch)
{
    bool any = false;
    for (int f = 0; f < batch; ++f) any = any || s[f].status == SolveStatus::running;
    cudaGraphSetConditional(handle, any ? 1u : 0u);
}

/// Ends a capture on scope exit unless it was ended normally (so a throwing
/// prologue or body does not leave the stream capturing).
class CaptureGuard {
public:
    explicit CaptureGuard(cudaStream_t stream) : stream_{stream} {}
    ~CaptureGuard()
    {
        if (stream_ == nullptr) return;
        cudaGraph_t discarded = nullptr;
        cudaStreamEndCapture(stream_, &discarded);
        cudaGetLastError();
    }
    void end()
    {
        cudaGraph_t captured = nullptr;
        const cudaStream_t stream = stream_;
        stream_ = nullptr;
        RECON_CUDA_TRY(cudaStreamEndCapture(stream, &captured));
    }

private:
    cudaStream_t stream_;
};

}  // namespace

struct SolveGraph::Impl {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t instance = nullptr;
    bool persistent = false;
    std::vector<PersistentCgnrProblem> launches;  // persistent: one per group of frames
    Array<float> workspace;                       // shared by the launches, one after the other

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl()
    {
        if (instance != nullptr) RECON_CUDA_TRY_NOTHROW(cudaGraphExecDestroy(instance));
        if (graph != nullptr) RECON_CUDA_TRY_NOTHROW(cudaGraphDestroy(graph));
    }
};

SolveGraph::SolveGraph(std::unique_ptr<Impl> impl) : impl_{std::move(impl)} {}
SolveGraph::SolveGraph(SolveGraph&&) noexcept = default;
SolveGraph& SolveGraph::operator=(SolveGraph&&) noexcept = default;
SolveGraph::~SolveGraph() = default;

SolveGraph SolveGraph::capture(const Executor& exec, const std::function<void()>& prologue,
                               const std::function<void()>& body,
                               View<const CgnrScalars> scalars, int batch)
{
    if (exec.is_cpu()) throw std::invalid_argument{"SolveGraph::capture needs a CUDA executor"};
    const cudaStream_t stream = cuda::stream_of(exec);
    RECON_CUDA_TRY(cudaSetDevice(exec.device()));
    cuda::reduction_scratch(exec, 1, 1);  // its zeroed tickets outside the capture
    RECON_CUDA_TRY(cudaStreamSynchronize(stream));

    auto impl = std::make_unique<Impl>();
    RECON_CUDA_TRY(cudaGraphCreate(&impl->graph, 0));
    cudaGraphConditionalHandle handle{};
    RECON_CUDA_TRY(
        cudaGraphConditionalHandleCreate(&handle, impl->graph, 0, cudaGraphCondAssignDefault));

    // Prologue, ending with the first evaluation of the loop condition.
    std::vector<cudaGraphNode_t> leaves;
    {
        RECON_CUDA_TRY(cudaStreamBeginCaptureToGraph(stream, impl->graph, nullptr, nullptr, 0,
                                                     cudaStreamCaptureModeRelaxed));
        CaptureGuard guard{stream};
        prologue();
        set_condition_kernel<<<1, 1, 0, stream>>>(handle, scalars.data, batch);
        RECON_CUDA_CHECK_LAUNCH();
        cudaStreamCaptureStatus status{};
        const cudaGraphNode_t* deps = nullptr;
        std::size_t count = 0;
        RECON_CUDA_TRY(
            cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &count));
        leaves.assign(deps, deps + count);
        guard.end();
    }

    // while (condition) { body; condition = any running }
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    cudaGraphNode_t loop = nullptr;
    RECON_CUDA_TRY(cudaGraphAddNode(&loop, impl->graph, leaves.data(), nullptr, leaves.size(),
                                    &params));
    const cudaGraph_t body_graph = params.conditional.phGraph_out[0];
    {
        RECON_CUDA_TRY(cudaStreamBeginCaptureToGraph(stream, body_graph, nullptr, nullptr, 0,
                                                     cudaStreamCaptureModeRelaxed));
        CaptureGuard guard{stream};
        body();
        set_condition_kernel<<<1, 1, 0, stream>>>(handle, scalars.data, batch);
        RECON_CUDA_CHECK_LAUNCH();
        guard.end();
    }
    RECON_CUDA_TRY(cudaGraphInstantiate(&impl->instance, impl->graph, 0));
    return SolveGraph{std::move(impl)};
}

SolveGraph SolveGraph::persistent(const Executor& exec, const PersistentCgnrProblem& problem)
{
    const std::string why = persistent_cgnr_supports(exec, problem);
    if (!why.empty()) throw std::invalid_argument{why};
    auto impl = std::make_unique<Impl>();
    impl->persistent = true;
    impl->launches = persistent_chunks(problem);
    std::size_t floats = 0;
    for (const PersistentCgnrProblem& launch : impl->launches) {
        floats = std::max(floats, cuda::persistent_workspace_floats(launch));
    }
    impl->workspace = Array<float>{exec, static_cast<size_type>(floats)};
    return SolveGraph{std::move(impl)};
}

void SolveGraph::launch(const Executor& exec)
{
    cuda::activate(exec);
    if (impl_->persistent) {
        // One after the other on one stream; each clears the workspace it
        // uses when it starts.
        for (const PersistentCgnrProblem& launch : impl_->launches) {
            cuda::launch_persistent_cgnr(exec, launch, impl_->workspace.data());
        }
    } else {
        RECON_CUDA_TRY(cudaGraphLaunch(impl_->instance, cuda::stream_of(exec)));
    }
}

}  // namespace recon::kernels
