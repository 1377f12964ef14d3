// ZeroMQ PULL receiver, PUSH producer and PUB publisher (see transport.hpp).

#include "stream/transport.hpp"

#include <zmq.hpp>

#include <cerrno>
#include <stdexcept>

namespace recon::stream {
namespace {

std::string last_endpoint(zmq::socket_t& socket)
{
    return socket.get(zmq::sockopt::last_endpoint);
}

}  // namespace

struct Receiver::Impl {
    zmq::context_t context{1};
    zmq::socket_t socket{context, zmq::socket_type::pull};
    std::string endpoint;
};

Receiver::Receiver(const std::string& endpoint, const ReceiverOptions& options)
    : impl_{std::make_unique<Impl>()}
{
    auto& s = impl_->socket;
    s.set(zmq::sockopt::rcvtimeo, static_cast<int>(options.receive_timeout.count()));
    s.set(zmq::sockopt::rcvhwm, options.high_water_mark);
    s.set(zmq::sockopt::maxmsgsize, options.max_message_bytes);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::reconnect_ivl, 100);
    s.set(zmq::sockopt::reconnect_ivl_max, 1000);
    try {
        s.connect(endpoint);
    } catch (const zmq::error_t& e) {
        throw std::runtime_error{"cannot connect to " + endpoint + ": " + e.what()};
    }
    impl_->endpoint = endpoint;
}

Receiver::~Receiver() = default;
Receiver::Receiver(Receiver&&) noexcept = default;
Receiver& Receiver::operator=(Receiver&&) noexcept = default;

std::optional<std::vector<std::uint8_t>> Receiver::receive()
{
    zmq::message_t message;
    // Stream V2 messages are single-part; a multipart message is taken part
    // by part, each judged on its own by the decoder.
    try {
        if (!impl_->socket.recv(message, zmq::recv_flags::none)) return std::nullopt;
    } catch (const zmq::error_t& e) {
        // A signal (SIGTERM, SIGINT) interrupts the wait: the caller looks
        // at its stop flag and calls again.
        if (e.num() == EINTR) return std::nullopt;
        throw std::runtime_error{"receive from " + impl_->endpoint + ": " + e.what()};
    }
    const auto* data = static_cast<const std::uint8_t*>(message.data());
    return std::vector<std::uint8_t>(data, data + message.size());
}

const std::string& Receiver::endpoint() const { return impl_->endpoint; }

struct Producer::Impl {
    zmq::context_t context{1};
    zmq::socket_t socket{context, zmq::socket_type::push};
    std::string endpoint;
};

Producer::Producer(const std::string& endpoint, const ProducerOptions& options)
    : impl_{std::make_unique<Impl>()}
{
    auto& s = impl_->socket;
    s.set(zmq::sockopt::sndtimeo, static_cast<int>(options.send_timeout.count()));
    s.set(zmq::sockopt::sndhwm, options.high_water_mark);
    s.set(zmq::sockopt::linger, 2000);
    try {
        s.bind(endpoint);
    } catch (const zmq::error_t& e) {
        throw std::runtime_error{"cannot bind " + endpoint + ": " + e.what()};
    }
    impl_->endpoint = last_endpoint(s);
}

Producer::~Producer() = default;
Producer::Producer(Producer&&) noexcept = default;
Producer& Producer::operator=(Producer&&) noexcept = default;

bool Producer::send(std::span<const std::uint8_t> bytes)
{
    zmq::message_t message{bytes.data(), bytes.size()};
    try {
        return impl_->socket.send(message, zmq::send_flags::none).has_value();
    } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) return false;  // interrupted by a signal: not sent
        throw std::runtime_error{"send on " + impl_->endpoint + ": " + e.what()};
    }
}

const std::string& Producer::endpoint() const { return impl_->endpoint; }

struct Publisher::Impl {
    zmq::context_t context{1};
    zmq::socket_t socket{context, zmq::socket_type::pub};
    std::string endpoint;
};

Publisher::Publisher(const std::string& endpoint) : impl_{std::make_unique<Impl>()}
{
    // Up to a second at close for subscribers to get the last images.
    impl_->socket.set(zmq::sockopt::linger, 1000);
    try {
        impl_->socket.bind(endpoint);
    } catch (const zmq::error_t& e) {
        throw std::runtime_error{"cannot bind " + endpoint + ": " + e.what()};
    }
    impl_->endpoint = last_endpoint(impl_->socket);
}

Publisher::~Publisher() = default;
Publisher::Publisher(Publisher&&) noexcept = default;
Publisher& Publisher::operator=(Publisher&&) noexcept = default;

void Publisher::publish(const std::string& topic, std::span<const std::uint8_t> payload,
                        std::span<const std::uint8_t> extra)
{
    const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    zmq::message_t head{topic.data(), topic.size()};
    zmq::message_t body{payload.data(), payload.size()};
    impl_->socket.send(head, more);
    if (extra.empty()) {
        impl_->socket.send(body, zmq::send_flags::dontwait);
        return;
    }
    zmq::message_t tail{extra.data(), extra.size()};
    impl_->socket.send(body, more);
    impl_->socket.send(tail, zmq::send_flags::dontwait);
}

const std::string& Publisher::endpoint() const { return impl_->endpoint; }

}  // namespace recon::stream
