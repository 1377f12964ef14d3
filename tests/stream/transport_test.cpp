// Real ZeroMQ over tcp://127.0.0.1 with ephemeral ports.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "stream/codec.hpp"
#include "stream/transport.hpp"

namespace recon::stream {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<std::uint8_t> receive_within(Receiver& receiver, std::chrono::milliseconds limit)
{
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
        if (auto bytes = receiver.receive()) return *bytes;
    }
    ADD_FAILURE() << "nothing received within " << limit.count() << " ms";
    return {};
}

TEST(Transport, PushPullCarriesMessagesInOrder)
{
    Producer producer{"tcp://127.0.0.1:*"};
    ASSERT_NE(producer.endpoint().find("tcp://127.0.0.1:"), std::string::npos);
    Receiver receiver{producer.endpoint(), {50ms, 64, 1 << 20}};
    for (std::uint64_t id = 0; id < 20; ++id) {
        ImageMessage image;
        image.image_id = id * 3 + 1;
        image.data["c"] = MultiDimArray::from_u16({2, 3}, {1, 2, 3, 4, 5, static_cast<std::uint16_t>(id)});
        ASSERT_TRUE(producer.send(encode_message(image, {Compression::bslz4, 0})));
    }
    for (std::uint64_t id = 0; id < 20; ++id) {
        const auto image = std::get<ImageMessage>(decode_message(receive_within(receiver, 2000ms)));
        EXPECT_EQ(image.image_id, id * 3 + 1);
        EXPECT_EQ(image.data.at("c").to_float()[5], static_cast<float>(id));
    }
}

TEST(Transport, ReceiveTimesOut)
{
    Producer producer{"tcp://127.0.0.1:*"};
    Receiver receiver{producer.endpoint(), {80ms, 64, 1 << 20}};
    const auto t0 = Clock::now();
    EXPECT_FALSE(receiver.receive().has_value());
    const auto waited = Clock::now() - t0;
    EXPECT_GE(waited, 70ms);
    EXPECT_LT(waited, 1500ms);
}

TEST(Transport, ReceiverSurvivesAProducerRestart)
{
    std::string endpoint;
    std::optional<Receiver> receiver;
    {
        Producer first{"tcp://127.0.0.1:*"};
        endpoint = first.endpoint();
        receiver.emplace(endpoint, ReceiverOptions{50ms, 64, 1 << 20});
        ASSERT_TRUE(first.send(encode_message(EndMessage{1, "first"})));
        EXPECT_EQ(std::get<EndMessage>(decode_message(receive_within(*receiver, 2000ms))).series_unique_id,
                  "first");
    }
    Producer second{endpoint};  // same port, new process-like socket
    ASSERT_TRUE(second.send(encode_message(EndMessage{2, "second"})));
    EXPECT_EQ(std::get<EndMessage>(decode_message(receive_within(*receiver, 5000ms))).series_unique_id,
              "second");
}

TEST(Transport, PublisherSendsTopicAndPayload)
{
    Publisher publisher{"tcp://127.0.0.1:*"};
    zmq::context_t context;
    zmq::socket_t sub{context, zmq::socket_type::sub};
    sub.set(zmq::sockopt::subscribe, "");
    sub.set(zmq::sockopt::rcvtimeo, 100);
    sub.connect(publisher.endpoint());
    const std::vector<std::uint8_t> payload{9, 8, 7};
    const auto until = Clock::now() + 3s;
    zmq::message_t topic;
    bool got = false;
    while (!got && Clock::now() < until) {  // PUB drops until the SUB has joined
        publisher.publish("image", payload);
        got = sub.recv(topic, zmq::recv_flags::none).has_value();
    }
    ASSERT_TRUE(got);
    EXPECT_EQ(topic.to_string(), "image");
    zmq::message_t body;
    ASSERT_TRUE(sub.recv(body, zmq::recv_flags::none));
    EXPECT_EQ(std::vector<std::uint8_t>(body.data<std::uint8_t>(), body.data<std::uint8_t>() + body.size()),
              payload);
}

}  // namespace
}  // namespace recon::stream
