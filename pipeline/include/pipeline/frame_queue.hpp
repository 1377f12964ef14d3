#pragma once
// A bounded, thread-safe FIFO between a frame source and the workers, with
// an explicit policy for a full queue and counters of what it dropped.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace recon::pipeline {

enum class DropPolicy {
    block,        // the producer waits for room (replay: no frame is lost)
    drop_oldest,  // the oldest waiting item is dropped to make room (live: newest matters)
    drop_newest,  // the new item is refused
};

/// Parses "block", "drop_oldest", "drop_newest"; throws std::invalid_argument.
DropPolicy parse_drop_policy(const std::string& text);
const char* to_string(DropPolicy policy);

/// What push() did.
enum class PushResult { accepted, accepted_dropped_oldest, dropped, closed };

template <class T>
class BoundedQueue {
public:
    /// `capacity` items at most wait in the queue (>= 1).
    BoundedQueue(std::size_t capacity, DropPolicy policy) : capacity_{capacity}, policy_{policy}
    {
        if (capacity_ == 0) throw std::invalid_argument{"queue capacity: expected >= 1, found 0"};
    }
    BoundedQueue(const BoundedQueue&) = delete;
    BoundedQueue& operator=(const BoundedQueue&) = delete;

    /// Adds an item under the drop policy. With `block` it waits for room;
    /// after close() the item is refused (PushResult::closed).
    PushResult push(T item)
    {
        std::unique_lock lock{mutex_};
        if (policy_ == DropPolicy::block) {
            not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
        }
        if (closed_) return PushResult::closed;
        PushResult result = PushResult::accepted;
        if (items_.size() >= capacity_) {
            ++dropped_;
            if (policy_ == DropPolicy::drop_newest) return PushResult::dropped;
            items_.pop_front();
            result = PushResult::accepted_dropped_oldest;
        }
        items_.push_back(std::move(item));
        ++pushed_;
        lock.unlock();
        not_empty_.notify_one();
        return result;
    }

    /// The oldest item; waits while the queue is empty and open. Empty
    /// optional once the queue is closed and drained.
    std::optional<T> pop()
    {
        std::unique_lock lock{mutex_};
        not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
        return take(lock);
    }

    /// As pop(), but gives up after `timeout` (empty optional).
    template <class Rep, class Period>
    std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout)
    {
        std::unique_lock lock{mutex_};
        not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); });
        return take(lock);
    }

    /// No more pushes; pop() drains what is left, then returns empty.
    void close()
    {
        {
            std::lock_guard lock{mutex_};
            closed_ = true;
        }
        not_empty_.notify_all();
        not_full_.notify_all();
    }

    std::size_t size() const
    {
        std::lock_guard lock{mutex_};
        return items_.size();
    }
    /// True once close() was called (items may still be left to pop).
    bool closed() const
    {
        std::lock_guard lock{mutex_};
        return closed_;
    }
    std::size_t capacity() const { return capacity_; }
    DropPolicy policy() const { return policy_; }
    /// Items dropped by the policy so far.
    std::int64_t dropped() const
    {
        std::lock_guard lock{mutex_};
        return dropped_;
    }
    /// Items accepted so far.
    std::int64_t pushed() const
    {
        std::lock_guard lock{mutex_};
        return pushed_;
    }

private:
    std::optional<T> take(std::unique_lock<std::mutex>& lock)
    {
        if (items_.empty()) return std::nullopt;
        std::optional<T> item{std::move(items_.front())};
        items_.pop_front();
        lock.unlock();
        not_full_.notify_one();
        return item;
    }

    const std::size_t capacity_;
    const DropPolicy policy_;
    mutable std::mutex mutex_;
    std::condition_variable not_empty_, not_full_;
    std::deque<T> items_;
    bool closed_ = false;
    std::int64_t dropped_ = 0;
    std::int64_t pushed_ = 0;
};

}  // namespace recon::pipeline
