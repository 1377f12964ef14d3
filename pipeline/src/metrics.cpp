// Prometheus text metrics and their HTTP/1.0 endpoint (see metrics.hpp).

#include "pipeline/metrics.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace recon::pipeline {
namespace {

std::string label_text(const Labels& labels, const std::string& extra = {})
{
    std::string text;
    for (const auto& [key, value] : labels) {
        std::string escaped;
        for (char c : value) {
            if (c == '\\' || c == '"') escaped += '\\';
            if (c == '\n') {
                escaped += "\\n";
                continue;
            }
            escaped += c;
        }
        text += (text.empty() ? "" : ",") + key + "=\"" + escaped + "\"";
    }
    if (!extra.empty()) text += (text.empty() ? "" : ",") + extra;
    return text.empty() ? "" : "{" + text + "}";
}

std::string number(double value)
{
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    std::ostringstream out;
    out.precision(10);
    out << value;
    return out.str();
}

/// Labels of a family member, kept as text: parse back for the bucket lines.
std::string with_le(const std::string& labels, const std::string& le)
{
    const std::string item = "le=\"" + le + "\"";
    if (labels.empty()) return "{" + item + "}";
    return labels.substr(0, labels.size() - 1) + "," + item + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_{std::move(upper_bounds)}, counts_(bounds_.size() + 1, 0)
{
    std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value)
{
    const auto bucket = static_cast<std::size_t>(
        std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    std::lock_guard lock{mutex_};
    ++counts_[bucket];
    sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const
{
    std::lock_guard lock{mutex_};
    Snapshot s{bounds_, {}, sum_, 0};
    std::int64_t running = 0;
    for (auto c : counts_) {
        running += c;
        s.cumulative.push_back(running);
    }
    s.count = running;
    return s;
}

std::vector<double> latency_buckets_ms()
{
    return {0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name, const std::string& help,
                                                 const char* type)
{
    Family& f = families_[name];
    if (f.type.empty()) {
        f.help = help;
        f.type = type;
    } else if (f.type != type) {
        throw std::logic_error{"metric " + name + " registered as " + f.type + " and " + type};
    }
    return f;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                  const Labels& labels)
{
    std::lock_guard lock{mutex_};
    auto& slot = family(name, help, "counter").counters[label_text(labels)];
    if (!slot) slot = std::make_unique<Counter>();
    return *slot;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const std::vector<double>& upper_bounds, const Labels& labels)
{
    std::lock_guard lock{mutex_};
    auto& slot = family(name, help, "histogram").histograms[label_text(labels)];
    if (!slot) slot = std::make_unique<Histogram>(upper_bounds);
    return *slot;
}

void MetricsRegistry::gauge(const std::string& name, const std::string& help,
                            std::function<double()> read)
{
    std::lock_guard lock{mutex_};
    family(name, help, "gauge").gauge = std::move(read);
}

std::string MetricsRegistry::render() const
{
    std::lock_guard lock{mutex_};
    std::string out;
    for (const auto& [name, f] : families_) {
        out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
        for (const auto& [labels, counter] : f.counters) {
            out += name + labels + " " + std::to_string(counter->value()) + "\n";
        }
        for (const auto& [labels, histogram] : f.histograms) {
            const auto s = histogram->snapshot();
            for (std::size_t i = 0; i < s.upper_bounds.size(); ++i) {
                out += name + "_bucket" + with_le(labels, number(s.upper_bounds[i])) + " " +
                       std::to_string(s.cumulative[i]) + "\n";
            }
            out += name + "_bucket" + with_le(labels, "+Inf") + " " + std::to_string(s.count) + "\n";
            out += name + "_sum" + labels + " " + number(s.sum) + "\n";
            out += name + "_count" + labels + " " + std::to_string(s.count) + "\n";
        }
        if (f.gauge) out += name + " " + number(f.gauge()) + "\n";
    }
    return out;
}

MetricsServer::MetricsServer(const MetricsRegistry& registry, const std::string& address, int port)
    : registry_{registry}
{
    const std::string where = address + ":" + std::to_string(port);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error{"metrics " + where + ": socket: " + std::strerror(errno)};
    const int yes = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (port < 0 || port > 65535 || ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
        ::close(listener_);
        throw std::runtime_error{"metrics " + where + ": expected an IPv4 address and a port 0..65535"};
    }
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 16) != 0) {
        const std::string reason = std::strerror(errno);
        ::close(listener_);
        throw std::runtime_error{"metrics " + where + ": cannot listen (" + reason + ")"};
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] { serve(); }};
}

MetricsServer::~MetricsServer()
{
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
}

void MetricsServer::serve()
{
    while (!stop_) {
        pollfd fd{listener_, POLLIN, 0};
        if (::poll(&fd, 1, 100) <= 0) continue;
        const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        answer(client);
        ::close(client);
    }
}

void MetricsServer::answer(int client)
{
    // A slow or silent client must not stall the server: short timeouts.
    timeval timeout{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    std::string request;
    char buffer[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos &&
           request.size() < 8192) {
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
    }
    const std::string line = request.substr(0, request.find_first_of("\r\n"));
    std::string status = "200 OK", body;
    if (line.rfind("GET /metrics", 0) == 0) {
        body = registry_.render();
    } else if (line.rfind("GET ", 0) == 0) {
        status = "404 Not Found";
        body = "not found: only /metrics is served\n";
    } else {
        status = "405 Method Not Allowed";
        body = "only GET is served\n";
    }
    const std::string response = "HTTP/1.0 " + status +
                                 "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                                 "Content-Length: " + std::to_string(body.size()) +
                                 "\r\nConnection: close\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < response.size()) {
        const ssize_t n = ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
    }
}

}  // namespace recon::pipeline
