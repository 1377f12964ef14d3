// The bounded frame queue: order, the three drop policies, blocking, close.

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/frame_queue.hpp"

namespace recon::pipeline {
namespace {

std::vector<int> random_items(int count)
{
    std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<int> value{1, 1 << 30};
    std::vector<int> items(static_cast<std::size_t>(count));
    for (auto& v : items) v = value(rng);
    return items;
}

std::vector<int> drain(BoundedQueue<int>& queue)
{
    queue.close();
    std::vector<int> out;
    while (auto item = queue.pop()) out.push_back(*item);
    return out;
}

TEST(BoundedQueue, KeepsFifoOrder)
{
    const auto items = random_items(7);
    BoundedQueue<int> queue{16, DropPolicy::block};
    for (int v : items) EXPECT_EQ(queue.push(v), PushResult::accepted);
    EXPECT_EQ(queue.size(), items.size());
    EXPECT_EQ(drain(queue), items);
    EXPECT_EQ(queue.dropped(), 0);
}

TEST(BoundedQueue, DropOldestKeepsTheNewest)
{
    const auto items = random_items(9);
    BoundedQueue<int> queue{4, DropPolicy::drop_oldest};
    for (std::size_t i = 0; i < items.size(); ++i) {
        EXPECT_EQ(queue.push(items[i]),
                  i < 4 ? PushResult::accepted : PushResult::accepted_dropped_oldest);
    }
    EXPECT_EQ(queue.dropped(), 5);
    EXPECT_EQ(drain(queue), std::vector<int>(items.end() - 4, items.end()));
}

TEST(BoundedQueue, DropNewestKeepsTheOldest)
{
    const auto items = random_items(9);
    BoundedQueue<int> queue{3, DropPolicy::drop_newest};
    for (std::size_t i = 0; i < items.size(); ++i) {
        EXPECT_EQ(queue.push(items[i]), i < 3 ? PushResult::accepted : PushResult::dropped);
    }
    EXPECT_EQ(queue.dropped(), 6);
    EXPECT_EQ(queue.pushed(), 3);
    EXPECT_EQ(drain(queue), std::vector<int>(items.begin(), items.begin() + 3));
}

TEST(BoundedQueue, BlockingLosesNothingAcrossThreads)
{
    const auto items = random_items(2000);
    BoundedQueue<int> queue{2, DropPolicy::block};
    std::vector<int> received;
    std::thread consumer{[&] {
        while (auto item = queue.pop()) received.push_back(*item);
    }};
    for (int v : items) ASSERT_EQ(queue.push(v), PushResult::accepted);
    queue.close();
    consumer.join();
    EXPECT_EQ(received, items);
    EXPECT_EQ(queue.dropped(), 0);
}

TEST(BoundedQueue, CloseWakesWaitersAndRefusesPushes)
{
    BoundedQueue<int> queue{1, DropPolicy::block};
    std::atomic<bool> woke{false};
    std::thread consumer{[&] {
        EXPECT_FALSE(queue.pop().has_value());
        woke = true;
    }};
    queue.close();
    consumer.join();
    EXPECT_TRUE(woke);
    EXPECT_EQ(queue.push(5), PushResult::closed);
    EXPECT_FALSE(queue.pop_for(std::chrono::milliseconds{1}).has_value());
}

TEST(BoundedQueue, PopForTimesOutOnAnOpenEmptyQueue)
{
    BoundedQueue<int> queue{2, DropPolicy::block};
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(queue.pop_for(std::chrono::milliseconds{20}).has_value());
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds{19});
}

TEST(BoundedQueue, RejectsZeroCapacityAndBadPolicyNames)
{
    EXPECT_THROW((BoundedQueue<int>{0, DropPolicy::block}), std::invalid_argument);
    EXPECT_THROW((void)parse_drop_policy("drop_random"), std::invalid_argument);
    EXPECT_EQ(parse_drop_policy("drop_oldest"), DropPolicy::drop_oldest);
}

}  // namespace
}  // namespace recon::pipeline
