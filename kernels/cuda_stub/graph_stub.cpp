// The whole-solve launches of a build without CUDA: every entry throws the
// backend's "no CUDA" error, so callers fail clearly instead of at link time.

#include <stdexcept>
#include <string>

#include "kernels/baselines.hpp"
#include "kernels/graph.hpp"
#include "kernels/persistent.hpp"

#define RECON_UNAVAILABLE_MESSAGE \
    "this build has no CUDA backend (reconfigure with a CUDA compiler and RECON_WITH_CUDA=ON)"

namespace recon::kernels {

namespace {
[[noreturn]] void unavailable(const char* what)
{
    throw std::runtime_error{std::string{what} + ": " + RECON_UNAVAILABLE_MESSAGE};
}
}  // namespace

struct SolveGraph::Impl {};

SolveGraph::SolveGraph(std::unique_ptr<Impl> impl) : impl_{std::move(impl)} {}
SolveGraph::SolveGraph(SolveGraph&&) noexcept = default;
SolveGraph& SolveGraph::operator=(SolveGraph&&) noexcept = default;
SolveGraph::~SolveGraph() = default;

SolveGraph SolveGraph::capture(const Executor&, const std::function<void()>&,
                               const std::function<void()>&, View<const CgnrScalars>, int)
{
    unavailable("SolveGraph::capture");
}
SolveGraph SolveGraph::persistent(const Executor&, const PersistentCgnrProblem&)
{
    unavailable("SolveGraph::persistent");
}
void SolveGraph::launch(const Executor&) { unavailable("SolveGraph::launch"); }

bool persistent_normal_matrix_applies(const Executor&, const PersistentCgnrProblem&)
{
    return false;
}

std::string persistent_cgnr_supports(const Executor&, const PersistentCgnrProblem&)
{
    return RECON_UNAVAILABLE_MESSAGE;
}

void apply_shared_x(const Executor&, const SystemView&, View<const float>, View<float>)
{
    unavailable("apply_shared_x");
}
void apply_adjoint_accumulating(const Executor&, const SystemView&, int, View<const float>,
                                View<float>, Accumulation)
{
    unavailable("apply_adjoint_accumulating");
}
void normal_apply_accumulating(const Executor&, const SystemView&, int, View<const float>,
                               View<float>, View<float>, Accumulation)
{
    unavailable("normal_apply_accumulating");
}

struct CusparseCsr::Impl {};
CusparseCsr::CusparseCsr(const Executor&, const HostCsr&) { unavailable("CusparseCsr"); }
CusparseCsr::~CusparseCsr() = default;
CusparseCsr::CusparseCsr(CusparseCsr&&) noexcept = default;
CusparseCsr& CusparseCsr::operator=(CusparseCsr&&) noexcept = default;
void CusparseCsr::apply(View<const float>, View<float>) { unavailable("CusparseCsr::apply"); }
void CusparseCsr::apply_adjoint(View<const float>, View<float>)
{
    unavailable("CusparseCsr::apply_adjoint");
}
void CusparseCsr::apply_adjoint_op_transpose(View<const float>, View<float>)
{
    unavailable("CusparseCsr::apply_adjoint_op_transpose");
}

struct CusparseCgls::Impl {};
CusparseCgls::CusparseCgls(const Executor&, const HostCsr&) { unavailable("CusparseCgls"); }
CusparseCgls::~CusparseCgls() = default;
CusparseCgls::CusparseCgls(CusparseCgls&&) noexcept = default;
CusparseCgls& CusparseCgls::operator=(CusparseCgls&&) noexcept = default;
View<float> CusparseCgls::input() { unavailable("CusparseCgls::input"); }
View<float> CusparseCgls::image() { unavailable("CusparseCgls::image"); }
void CusparseCgls::solve_host_loop(int) { unavailable("CusparseCgls::solve_host_loop"); }
void CusparseCgls::solve_graph(int) { unavailable("CusparseCgls::solve_graph"); }

BenchStream::BenchStream(int) { unavailable("BenchStream"); }
BenchStream::~BenchStream() = default;
BenchStream::BenchStream(BenchStream&& other) noexcept : stream_{other.stream_}
{
    other.stream_ = nullptr;
}
double time_on_device_ms(const std::vector<Executor>&, const std::function<void()>&)
{
    unavailable("time_on_device_ms");
}

}  // namespace recon::kernels
