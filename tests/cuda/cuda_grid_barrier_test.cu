// grid_barrier (kernels/cuda/grid_barrier.cuh) in cooperative launches of
// several shapes: no block passes a barrier before every block has arrived,
// and every block reads, with plain loads through L1, what every other
// block wrote before it (two buffers in turn, so a stale line from two
// barriers back would show an old value).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "grid_barrier.cuh"

namespace recon::kernels::cuda {
namespace {

constexpr int threads = 256;

struct Counts {
    unsigned early;   // a block that saw fewer arrivals than the barriers passed
    unsigned stale;   // a value read after a barrier that is not the one written before it
};

/// `rounds` barriers; before each, every block adds one arrival and every
/// thread writes its value for the round; after it, each thread checks the
/// arrivals and reads another block's value.
__global__ void barrier_rounds_kernel(int rounds, unsigned* arrivals, float* values, Counts* counts)
{
    const unsigned blocks = gridDim.x;
    const int per_round = static_cast<int>(blocks) * threads;
    unsigned early = 0, stale = 0;
    for (int r = 0; r < rounds; ++r) {
        float* const buffer = values + (r % 2) * per_round;
        buffer[blockIdx.x * threads + threadIdx.x] = static_cast<float>(r * 7 + blockIdx.x);
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
        grid_barrier();
        if (threadIdx.x == 0 && __ldcg(arrivals) < blocks * static_cast<unsigned>(r + 1)) ++early;
        // a different block for each thread and round
        const unsigned other = (blockIdx.x + 1 + threadIdx.x + static_cast<unsigned>(r)) % blocks;
        if (buffer[other * threads + threadIdx.x] != static_cast<float>(r * 7 + other)) ++stale;
    }
    if (early != 0) atomicAdd(&counts->early, early);
    if (stale != 0) atomicAdd(&counts->stale, stale);
}

/// Runs the kernel cooperatively on `blocks` blocks; the counts of what went wrong.
Counts run_rounds(int blocks, int rounds)
{
    unsigned* arrivals = nullptr;
    float* values = nullptr;
    Counts* counts = nullptr;
    EXPECT_EQ(cudaMalloc(&arrivals, sizeof(unsigned)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&values, 2 * static_cast<size_t>(blocks) * threads * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&counts, sizeof(Counts)), cudaSuccess);
    EXPECT_EQ(cudaMemset(arrivals, 0, sizeof(unsigned)), cudaSuccess);
    EXPECT_EQ(cudaMemset(values, 0xff, 2 * static_cast<size_t>(blocks) * threads * sizeof(float)),
              cudaSuccess);  // NaN: never a value of a round
    EXPECT_EQ(cudaMemset(counts, 0, sizeof(Counts)), cudaSuccess);
    void* args[] = {&rounds, &arrivals, &values, &counts};
    EXPECT_EQ(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(barrier_rounds_kernel),
                                          dim3(blocks), dim3(threads), args),
              cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Counts out{~0u, ~0u};
    EXPECT_EQ(cudaMemcpy(&out, counts, sizeof(Counts), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(arrivals);
    cudaFree(values);
    cudaFree(counts);
    return out;
}

/// Blocks of the kernel that the device holds at once.
int resident_blocks()
{
    int device = 0, sms = 0, per_sm = 0;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
    EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier_rounds_kernel, threads, 0),
              cudaSuccess);
    return sms * per_sm;
}

TEST(GridBarrier, NoBlockPassesEarlyAndEveryWriteIsSeen)
{
    RECON_REQUIRE_GPU();
    const int most = resident_blocks();
    ASSERT_GT(most, 2);
    // one block, a few, an odd count, one per SM or so, every block the device holds
    for (int blocks : {1, 2, 7, most / 2 + 1, most}) {
        SCOPED_TRACE("blocks = " + std::to_string(blocks));
        const Counts c = run_rounds(blocks, 2000);
        EXPECT_EQ(c.early, 0u);
        EXPECT_EQ(c.stale, 0u);
    }
}

TEST(GridBarrier, LaunchesOneAfterAnother)
{
    RECON_REQUIRE_GPU();
    // the launch's word is left as the barriers found it: the next launch,
    // of another size, starts from a consistent state
    const int most = resident_blocks();
    for (int launch = 0; launch < 6; ++launch) {
        const int blocks = launch % 2 == 0 ? most : 3 + launch;
        SCOPED_TRACE("launch " + std::to_string(launch) + ", blocks = " + std::to_string(blocks));
        const Counts c = run_rounds(blocks, 301);  // an odd count of barriers
        EXPECT_EQ(c.early, 0u);
        EXPECT_EQ(c.stale, 0u);
    }
}

}  // namespace
}  // namespace recon::kernels::cuda
