// The test suites' own helpers: fresh seeds, and RECON_TEST_SEED to replay
// the seed a failure printed.

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>

#include "test_utils.hpp"

namespace recon {
namespace {

TEST(TestUtils, RecordedSeedReplaysTheSameInputs)
{
    const test::ScopedEnv seed{"RECON_TEST_SEED", "7310649004315079602"};
    EXPECT_EQ(test::fresh_seed(), 7310649004315079602ull);
    EXPECT_EQ(test::fresh_seed(), 7310649004315079602ull);
    std::mt19937_64 a{test::fresh_seed()}, b{test::fresh_seed()};
    EXPECT_EQ(test::random_vector(100, a), test::random_vector(100, b));
}

TEST(TestUtils, AMalformedSeedIsAClearError)
{
    for (const char* bad : {"12abc", "-5", "99999999999999999999999", "seed"}) {
        const test::ScopedEnv seed{"RECON_TEST_SEED", bad};
        try {
            test::fresh_seed();
            ADD_FAILURE() << "no error for RECON_TEST_SEED=" << bad;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string{e.what()}.find(bad), std::string::npos) << e.what();
        }
    }
}

TEST(TestUtils, ScopedEnvPutsBackWhatWasThere)
{
    const test::ScopedEnv outer{"RECON_TEST_SEED", "1"};
    {
        const test::ScopedEnv inner{"RECON_TEST_SEED", "2"};
        EXPECT_EQ(test::fresh_seed(), 2u);
    }
    EXPECT_EQ(test::fresh_seed(), 1u);
}

TEST(TestUtils, UnsetOrEmptyDrawsFreshSeeds)
{
    const test::ScopedEnv empty{"RECON_TEST_SEED", ""};
    // two draws of 64 random bits agree with probability 2^-64
    EXPECT_NE(test::fresh_seed(), test::fresh_seed());
}

}  // namespace
}  // namespace recon
