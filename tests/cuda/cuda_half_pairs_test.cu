// The half pairs of the batch kernel's tensor-core product
// (kernels/cuda/half_pairs.cuh) on the device against the host: the split
// of a float into two halves, the exact scaling by powers of two and the
// exponent arithmetic that picks the scales, and one mma.m16n8k16 of
// split operands against the same product in double, on fresh random
// values of every scale.

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_support.hpp"
#include "half_pairs.cuh"

namespace recon::kernels::cuda {
namespace {

/// Copies v to the device, runs launch(its device pointer, the output's),
/// copies `out_count` values of type Out back.
template <class In, class Out, class Launch>
std::vector<Out> on_device(const std::vector<In>& v, std::size_t out_count, Launch launch)
{
    const Array<In> in = test::upload(v);
    Array<Out> out{test::gpu(), static_cast<size_type>(out_count)};
    launch(in.data(), out.data());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return out.to_host();
}

/// kernel(in, n, out) over every element of v, 256 threads a block: one
/// output per input.
template <class In, class Out>
std::vector<Out> each_on_device(const std::vector<In>& v, void (*kernel)(const In*, int, Out*))
{
    const int n = static_cast<int>(v.size());
    return on_device<In, Out>(v, v.size(), [&](const In* in, Out* out) {
        kernel<<<(n + 255) / 256, 256>>>(in, n, out);
    });
}

/// A float of random sign with its magnitude in [2^(lo − 1), 2^hi).
float random_float(std::mt19937_64& rng, int lo, int hi)
{
    std::uniform_real_distribution<double> mantissa(0.5, 1.0);
    std::uniform_int_distribution<int> exponent(lo, hi);
    return static_cast<float>((rng() % 2 == 0 ? 1 : -1) * std::ldexp(mantissa(rng), exponent(rng)));
}

__global__ void split_kernel(const float* v, int n, float2* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const HalfPair p = split_half(v[i]);
    out[i] = float2{__half2float(p.hi), __half2float(p.lo)};
}

// Within the halves' normal range (|v| ≥ 2^-3 up to the scaled values'
// 2^15) hi + lo keeps v to 2^-22; below, to half the halves' smallest
// spacing, 2^-25; hi alone to 2^-11. Zeros stay zeros, non-finite values
// non-finite.
TEST(HalfPairs, SplitKeepsTwentyTwoBits)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::vector<float> v(1 << 16);
    for (float& x : v) x = random_float(rng, -30, 15);
    v[0] = 0.0f;
    v[1] = -0.0f;
    v[2] = std::numeric_limits<float>::quiet_NaN();
    v[3] = std::numeric_limits<float>::infinity();
    const auto out = each_on_device(v, split_kernel);
    EXPECT_EQ(out[0].x, 0.0f);
    EXPECT_EQ(out[0].y, 0.0f);
    EXPECT_EQ(out[1].x, 0.0f);
    EXPECT_TRUE(std::isnan(out[2].x));
    EXPECT_TRUE(std::isinf(out[3].x));
    const double tiny = std::ldexp(1.0, -25);
    for (std::size_t i = 4; i < v.size(); ++i) {
        const double x = v[i], hi = out[i].x, lo = out[i].y;
        const double error = std::abs(x - (hi + lo));
        ASSERT_LE(std::abs(x - hi), std::ldexp(std::abs(x), -11) + tiny) << "v = " << x;
        if (std::abs(x) >= 0.25) {
            ASSERT_LE(error, std::ldexp(std::abs(x), -22)) << "v = " << x;
        } else {
            ASSERT_LE(error, std::ldexp(std::abs(x), -22) + tiny) << "v = " << x;
        }
    }
}

struct Scaled {
    float v;
    int e;
};

__global__ void scale_kernel(const Scaled* s, int n, float* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = times_power_of_two(s[i].v, s[i].e);
}

// v·2^e bit for bit as ldexp where v and the result are normal floats,
// for |e| up to 250 (two factors, each a normal float).
TEST(HalfPairs, PowerOfTwoScalingIsExact)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<int> target(-125, 127);
    std::vector<Scaled> cases(1 << 15);
    for (Scaled& c : cases) {
        // the result's exponent first, so that both ends are normal
        const int to = target(rng);
        c.v = random_float(rng, -124, 127);
        c.e = to - std::ilogb(c.v) - 1;
    }
    cases[0] = {std::ldexp(1.0f, -126), 250};
    cases[1] = {std::ldexp(1.0f, 126), -250};
    const auto out = each_on_device(cases, scale_kernel);
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const float expected = std::ldexp(cases[i].v, cases[i].e);
        ASSERT_EQ(out[i], expected) << cases[i].v << " * 2^" << cases[i].e;
    }
}

struct Exponents {
    int above, below;
    double root;
};

__global__ void exponent_kernel(const double* v, int n, Exponents* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = Exponents{v[i] > 0.0 && isfinite(v[i]) ? exponent_above(v[i]) : 0, exponent_below(v[i], 14),
                       root_above(v[i])};
}

// exponent_above(v) = e with 2^(e−1) ≤ v < 2^e for normal v; exponent_below
// puts v·2^s in [2^13, 2^14); root_above(v) is a power of two between
// √2 √v and 2√2 √v for normal v up to double's largest, and at least √2 √v
// for subnormal v; 0, infinity and NaN give 0 (no scale) and pass through
// the root.
TEST(HalfPairs, ExponentsAndTheRootBound)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<double> mantissa(0.5, 1.0);
    std::uniform_int_distribution<int> exponent(-1021, 1024);
    std::vector<double> v(1 << 15);
    for (double& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
    v[0] = 0.0;
    v[1] = std::numeric_limits<double>::infinity();
    v[2] = std::numeric_limits<double>::quiet_NaN();
    v[3] = std::numeric_limits<double>::denorm_min();
    v[4] = std::numeric_limits<double>::max();
    const auto out = each_on_device(v, exponent_kernel);
    EXPECT_EQ(out[0].below, 0);
    EXPECT_EQ(out[0].root, 0.0);
    EXPECT_EQ(out[1].below, 0);
    EXPECT_TRUE(std::isinf(out[1].root));
    EXPECT_EQ(out[2].below, 0);
    EXPECT_TRUE(std::isnan(out[2].root));
    EXPECT_GE(out[3].root, std::sqrt(2.0) * std::sqrt(v[3]));
    for (std::size_t i = 3; i < v.size(); ++i) {
        const double x = v[i];
        if (std::isnormal(x)) {
            ASSERT_EQ(out[i].above, std::ilogb(x) + 1) << "v = " << x;
            ASSERT_GE(std::ldexp(x, out[i].below), std::ldexp(1.0, 13)) << "v = " << x;
            ASSERT_LT(std::ldexp(x, out[i].below), std::ldexp(1.0, 14)) << "v = " << x;
        }
        const double r = out[i].root;
        int e = 0;
        ASSERT_EQ(std::frexp(r, &e), 0.5) << "a power of two, v = " << x;
        ASSERT_GE(r, std::sqrt(2.0) * std::sqrt(x)) << "v = " << x;
        if (std::isnormal(x)) ASSERT_LE(r, 2.0 * std::sqrt(2.0) * std::sqrt(x)) << "v = " << x;
    }
}

/// One 16 x 16 tile of G and a 16 x 4 block of d (4 frames), as floats.
struct Tile {
    float g[16][16];
    float d[16][4];
};

/// (G d) of a tile, one warp a tile, the way the batch kernel forms it: G's
/// rows scaled into [2^14, 2^15) and split into the A operand's hi and lo
/// halves, d's frames scaled below 2^14 and split into the B operand's 8
/// columns (frame f's hi in column f, its lo in column f + 4), two mma
/// (G's hi, then its lo), columns f and f + 4 added and scaled back.
__global__ void tile_product_kernel(const Tile* tiles, int count, float* out)
{
    const int tile = blockIdx.x * (blockDim.x / 32) + static_cast<int>(threadIdx.x / 32);
    if (tile >= count) return;
    const Tile& t = tiles[tile];
    const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, q = lane % 4;
    int row_exponent[2], frame_exponent = 0;
    for (int half = 0; half < 2; ++half) {
        float most = 0.0f;
        for (int k = 0; k < 16; ++k) most = fmaxf(most, fabsf(t.g[g + 8 * half][k]));
        row_exponent[half] = exponent_below(most, 15);
    }
    {
        float most = 0.0f;
        for (int k = 0; k < 16; ++k) most = fmaxf(most, fabsf(t.d[k][g % 4]));
        frame_exponent = exponent_below(most, 14);
    }
    // A: register r holds rows g (r even) or g + 8 (r odd), columns 2q, 2q + 1 (+ 8 for r ≥ 2)
    unsigned a_hi[4], a_lo[4];
    for (int r = 0; r < 4; ++r) {
        const int row = g + 8 * (r % 2), col = 2 * q + 8 * (r / 2);
        const HalfPair p0 = split_half(times_power_of_two(t.g[row][col], row_exponent[r % 2]));
        const HalfPair p1 = split_half(times_power_of_two(t.g[row][col + 1], row_exponent[r % 2]));
        a_hi[r] = pack_halves(p0.hi, p1.hi);
        a_lo[r] = pack_halves(p0.lo, p1.lo);
    }
    // B: register r holds rows 2q, 2q + 1 (+ 8 for r = 1) of column g
    unsigned b[2];
    for (int r = 0; r < 2; ++r) {
        const int k = 2 * q + 8 * r;
        const HalfPair p0 = split_half(times_power_of_two(t.d[k][g % 4], frame_exponent));
        const HalfPair p1 = split_half(times_power_of_two(t.d[k + 1][g % 4], frame_exponent));
        b[r] = g < 4 ? pack_halves(p0.hi, p1.hi) : pack_halves(p0.lo, p1.lo);
    }
    float c[4] = {};
    mma_16816(c, a_hi[0], a_hi[1], a_hi[2], a_hi[3], uint2{b[0], b[1]});
    mma_16816(c, a_lo[0], a_lo[1], a_lo[2], a_lo[3], uint2{b[0], b[1]});
    // c: rows g (c[0], c[1]) and g + 8 (c[2], c[3]), columns 2q, 2q + 1;
    // column f (hi) and f + 4 (lo) are lanes q and q + 2
    for (int i = 0; i < 4; ++i) c[i] += __shfl_xor_sync(0xffffffffu, c[i], 2);
    // every lane's frame exponents: frame f's is lane 4 f's
    const int e0 = __shfl_sync(0xffffffffu, frame_exponent, 8 * q);
    const int e1 = __shfl_sync(0xffffffffu, frame_exponent, 8 * q + 4);
    if (q < 2) {
        for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i / 2), frame = 2 * q + i % 2;
            out[(tile * 16 + row) * 4 + frame] =
                times_power_of_two(c[i], -(row_exponent[i / 2] + (i % 2 == 0 ? e0 : e1)));
        }
    }
}

// Each row of G at its own scale (2^-40 to 2^40, entries over 12 binary
// orders within a row) and each frame of d at its own (2^-60 to 2^60):
// within 2^-19 of the terms' sizes of the product in double, where the
// float G d of the unscaled values sits within ~16 roundings (2^-20).
TEST(HalfPairs, TensorProductOfPairsMatchesDouble)
{
    RECON_REQUIRE_GPU();
    const auto seed = test::fresh_seed();
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<int> row_scale(-40, 40), frame_scale(-60, 60);
    std::vector<Tile> tiles(512);
    for (Tile& t : tiles) {
        for (auto& row : t.g) {
            const int s = row_scale(rng);
            for (float& x : row) x = random_float(rng, s - 12, s);
        }
        int f_scale[4];
        for (int& s : f_scale) s = frame_scale(rng);
        for (auto& k : t.d) {
            for (int f = 0; f < 4; ++f) k[f] = random_float(rng, f_scale[f] - 12, f_scale[f]);
        }
    }
    const int count = static_cast<int>(tiles.size());
    const auto out = on_device<Tile, float>(tiles, tiles.size() * 64, [&](const Tile* in, float* o) {
        tile_product_kernel<<<(count + 7) / 8, 256>>>(in, count, o);
    });
    for (int i = 0; i < count; ++i) {
        for (int row = 0; row < 16; ++row) {
            for (int f = 0; f < 4; ++f) {
                double sum = 0.0, size = 0.0;
                for (int k = 0; k < 16; ++k) {
                    const double term = static_cast<double>(tiles[i].g[row][k]) * tiles[i].d[k][f];
                    sum += term;
                    size += std::abs(term);
                }
                ASSERT_LE(std::abs(out[(i * 16 + row) * 4 + f] - sum), std::ldexp(size, -19))
                    << "tile " << i << ", row " << row << ", frame " << f;
            }
        }
    }
}

}  // namespace
}  // namespace recon::kernels::cuda
