#pragma once
// ZeroMQ transport of Stream V2: the detector side binds a PUSH socket, the
// consumer connects a PULL socket. Both own their context and socket (RAII).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace recon::stream {

struct ReceiverOptions {
    std::chrono::milliseconds receive_timeout{200};  // receive() returns nullopt after this
    int high_water_mark = 64;                         // messages queued inside ZeroMQ
    /// ZMQ_MAXMSGSIZE; -1: no limit. Off by default because libzmq treats a
    /// larger message as a protocol error and does not reconnect, which
    /// would leave the receiver deaf; the decoder's limits guard memory.
    std::int64_t max_message_bytes = -1;
};

/// PULL socket connected to a producer's endpoint (e.g. tcp://host:31001).
/// ZeroMQ reconnects by itself when the producer restarts.
class Receiver {
public:
    Receiver(const std::string& endpoint, const ReceiverOptions& options = {});
    ~Receiver();
    Receiver(Receiver&&) noexcept;
    Receiver& operator=(Receiver&&) noexcept;

    /// One message's bytes, or nullopt when none arrived within the timeout.
    std::optional<std::vector<std::uint8_t>> receive();
    const std::string& endpoint() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

struct ProducerOptions {
    std::chrono::milliseconds send_timeout{1000};  // send() fails after this
    int high_water_mark = 1000;
};

/// PUSH socket bound to an endpoint; "tcp://127.0.0.1:*" picks a free port
/// (see endpoint()).
class Producer {
public:
    Producer(const std::string& endpoint, const ProducerOptions& options = {});
    ~Producer();
    Producer(Producer&&) noexcept;
    Producer& operator=(Producer&&) noexcept;

    /// Sends one message; false when it could not be queued within the timeout.
    bool send(std::span<const std::uint8_t> bytes);
    /// The endpoint actually bound (with the port resolved).
    const std::string& endpoint() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// PUB socket bound to an endpoint: publishes [topic, payload] (and an
/// optional third part) multipart messages.
class Publisher {
public:
    explicit Publisher(const std::string& endpoint);
    ~Publisher();
    Publisher(Publisher&&) noexcept;
    Publisher& operator=(Publisher&&) noexcept;

    /// Publishes without blocking (ZeroMQ drops for slow subscribers);
    /// `extra`, when not empty, is sent as a third part.
    void publish(const std::string& topic, std::span<const std::uint8_t> payload,
                 std::span<const std::uint8_t> extra = {});
    const std::string& endpoint() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace recon::stream
