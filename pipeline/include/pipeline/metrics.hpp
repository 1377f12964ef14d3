#pragma once
// Prometheus text metrics (exposition format 0.0.4): counters, histograms
// and gauges read at scrape time, and a minimal HTTP/1.0 server on loopback
// that answers GET /metrics.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace recon::pipeline {

using Labels = std::map<std::string, std::string>;

/// A monotonically increasing count; thread-safe.
class Counter {
public:
    void add(std::int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
    std::int64_t value() const { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::int64_t> value_{0};
};

/// Observations counted into cumulative buckets (upper bounds); thread-safe.
class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);

    struct Snapshot {
        std::vector<double> upper_bounds;
        std::vector<std::int64_t> cumulative;  // per bound, then +Inf
        double sum = 0.0;
        std::int64_t count = 0;
    };
    Snapshot snapshot() const;

private:
    mutable std::mutex mutex_;
    std::vector<double> bounds_;
    std::vector<std::int64_t> counts_;  // per bucket, last = above every bound
    double sum_ = 0.0;
};

/// Latency buckets in milliseconds, 0.25 ms .. 10 s.
std::vector<double> latency_buckets_ms();

/// Every metric of a process, by name and label set. References returned
/// stay valid for the registry's lifetime. Thread-safe.
class MetricsRegistry {
public:
    Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
    Histogram& histogram(const std::string& name, const std::string& help,
                         const std::vector<double>& upper_bounds, const Labels& labels = {});
    /// A gauge whose value `read` returns at scrape time (must be thread-safe).
    void gauge(const std::string& name, const std::string& help, std::function<double()> read);

    /// The text exposition of every metric.
    std::string render() const;

private:
    struct Family {
        std::string help, type;
        std::map<std::string, std::unique_ptr<Counter>> counters;      // by label text
        std::map<std::string, std::unique_ptr<Histogram>> histograms;  // by label text
        std::function<double()> gauge;
    };
    Family& family(const std::string& name, const std::string& help, const char* type);

    mutable std::mutex mutex_;
    std::map<std::string, Family> families_;
};

/// Serves registry.render() at http://address:port/metrics (HTTP/1.0, one
/// request per connection, one connection at a time) on its own thread.
class MetricsServer {
public:
    /// Binds now; throws std::runtime_error naming the address and port.
    /// port 0 picks a free port (see port()).
    MetricsServer(const MetricsRegistry& registry, const std::string& address, int port);
    ~MetricsServer();  // stops the thread and closes the socket
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    int port() const { return port_; }

private:
    void serve();
    void answer(int client);

    const MetricsRegistry& registry_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace recon::pipeline
