#pragma once
// A whole solve as one launch on a CUDA stream: either a captured CUDA graph
// (a prologue, then a conditional WHILE node whose body runs several
// iterations per turn and whose condition is "any frame still running"),
// or one persistent cooperative kernel (kernels/persistent.hpp).
// No CUDA header here; without CUDA every entry throws "this build has no
// CUDA backend".

#include <functional>
#include <memory>

#include "kernels/executor.hpp"
#include "kernels/persistent.hpp"
#include "kernels/solver_state.hpp"

namespace recon::kernels {

/// Move-only owner of an instantiated solve (graph, or persistent kernel
/// with its workspace). The buffers it was built over are borrowed and must
/// outlive it; a new frame only rewrites them (b, x0) before launch().
class SolveGraph {
public:
    /// Captures `prologue()` then, inside a conditional WHILE loop,
    /// `body()`; both must only queue work on exec.stream() (no host
    /// synchronization, no allocation the graph would not own). After the
    /// prologue and after every body turn a one-thread kernel sets the loop
    /// condition to "some frame of `scalars` (batch entries, device memory)
    /// has status running". Captured in relaxed mode on exec.stream(), which
    /// must not be capturing already.
    static SolveGraph capture(const Executor& exec, const std::function<void()>& prologue,
                              const std::function<void()>& body, View<const CgnrScalars> scalars,
                              int batch);

    /// A persistent cooperative kernel solving `problem` (see
    /// persistent.hpp); throws std::invalid_argument when the problem does
    /// not fit the kernel (persistent_cgnr_supports() says why).
    static SolveGraph persistent(const Executor& exec, const PersistentCgnrProblem& problem);

    SolveGraph(SolveGraph&&) noexcept;
    SolveGraph& operator=(SolveGraph&&) noexcept;
    ~SolveGraph();

    /// Queues the whole solve on exec.stream(); does not synchronize.
    void launch(const Executor& exec);

    struct Impl;

private:
    explicit SolveGraph(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace recon::kernels
