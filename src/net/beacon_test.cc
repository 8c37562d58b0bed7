#include "net/beacon.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace drover::net {
namespace {

const std::string kBeaconToken(64, 'a');
const std::string kOtherToken(64, 'b');

BeaconInfo Info(Time sent) {
  BeaconInfo info;
  info.server_id = "0123456789abcdef";
  info.addresses = {"10.213.0.10", "192.168.1.5"};
  info.port = 7210;
  info.tls = true;
  info.fingerprint = std::string(64, 'f');
  info.sent = sent;
  return info;
}

TEST(BeaconTest, SignedBeaconVerifiesAndRoundTrips) {
  SimulatedClock clock;
  const std::string datagram = EncodeBeacon(Info(clock.Now()), kBeaconToken);
  EXPECT_TRUE(datagram.starts_with("drover-beacon/1 "));
  EXPECT_EQ(datagram.find(kBeaconToken), std::string::npos) << "the token must never travel";
  clock.Advance(Seconds(2));
  Result<BeaconInfo> got = DecodeBeacon(datagram, kBeaconToken, clock.Now());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->server_id, "0123456789abcdef");
  EXPECT_EQ(got->addresses, (std::vector<std::string>{"10.213.0.10", "192.168.1.5"}));
  EXPECT_EQ(got->port, 7210);
  EXPECT_TRUE(got->tls);
  EXPECT_EQ(got->fingerprint, std::string(64, 'f'));
  EXPECT_EQ(ToMicros(got->sent), ToMicros(clock.Now() - Seconds(2)));
}

TEST(BeaconTest, WrongTokenIsUnauthenticated) {
  SimulatedClock clock;
  Result<BeaconInfo> got = DecodeBeacon(EncodeBeacon(Info(clock.Now()), kOtherToken), kBeaconToken,
                                        clock.Now());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(got.status().message().find("bad HMAC"), std::string::npos);
}

TEST(BeaconTest, TamperedPayloadIsUnauthenticated) {
  SimulatedClock clock;
  std::string datagram = EncodeBeacon(Info(clock.Now()), kBeaconToken);
  const size_t at = datagram.find("10.213.0.10");
  ASSERT_NE(at, std::string::npos);
  datagram.replace(at, 11, "10.213.0.66");  // redirect workers elsewhere
  Result<BeaconInfo> got = DecodeBeacon(datagram, kBeaconToken, clock.Now());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  // A changed MAC fails the same way.
  std::string bad_mac = EncodeBeacon(Info(clock.Now()), kBeaconToken);
  bad_mac[20] = bad_mac[20] == '0' ? '1' : '0';
  EXPECT_EQ(DecodeBeacon(bad_mac, kBeaconToken, clock.Now()).status().code(),
            StatusCode::kUnauthenticated);
}

TEST(BeaconTest, StaleOrFutureTimestampIsRejected) {
  SimulatedClock clock;
  const std::string datagram = EncodeBeacon(Info(clock.Now()), kBeaconToken);
  clock.Advance(kBeaconMaxAge + Seconds(1));
  Result<BeaconInfo> replayed = DecodeBeacon(datagram, kBeaconToken, clock.Now());
  ASSERT_FALSE(replayed.ok());
  EXPECT_EQ(replayed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(replayed.status().message().find("stale"), std::string::npos);
  const std::string future = EncodeBeacon(Info(clock.Now() + kBeaconMaxAge + Seconds(1)), kBeaconToken);
  EXPECT_EQ(DecodeBeacon(future, kBeaconToken, clock.Now()).status().code(),
            StatusCode::kFailedPrecondition);
  // Within the window it is fine.
  EXPECT_TRUE(DecodeBeacon(datagram, kBeaconToken, clock.Now(), kBeaconMaxAge * 2).ok());
}

TEST(BeaconTest, GarbageIsInvalidArgument) {
  SimulatedClock clock;
  for (const std::string& junk : {std::string(), std::string("hello"), std::string(200, '\0'),
                                 std::string("drover-beacon/1 ") + std::string(64, '0')}) {
    EXPECT_EQ(DecodeBeacon(junk, kBeaconToken, clock.Now()).status().code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(BeaconTest, SenderRejectsBadOptions) {
  EventLoop loop;
  RealClock clock;
  BeaconSenderOptions o;
  o.token = kBeaconToken;
  o.clock = &clock;
  o.destinations = {"not-an-address"};
  EXPECT_EQ(BeaconSender::Start(loop, o).status().code(), StatusCode::kInvalidArgument);
  o.destinations = {"127.0.0.1"};
  o.interval = Duration::zero();
  EXPECT_EQ(BeaconSender::Start(loop, o).status().code(), StatusCode::kInvalidArgument);
  o.interval = Seconds(1);
  o.token.clear();
  EXPECT_EQ(BeaconSender::Start(loop, o).status().code(), StatusCode::kInvalidArgument);
}

// Real datagrams over loopback: a sender with the wrong token and one with
// the right token; the listener logs the first with its sender address and
// returns the second. Each sender sends its first beacon inside Start, so
// they reach the socket in that order.
TEST(BeaconTest, ListenerSkipsBadBeaconsAndReturnsTheFirstThatVerifies) {
  Result<std::unique_ptr<BeaconListener>> listener = BeaconListener::Open(0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EventLoop loop;
  RealClock clock;
  BeaconSenderOptions o;
  o.port = (*listener)->port();
  o.destinations = {"127.0.0.1"};
  o.info = Info(Time{});
  o.info.addresses = {"127.0.0.1", "10.213.0.10"};
  o.clock = &clock;
  o.token = kOtherToken;
  Result<std::unique_ptr<BeaconSender>> impostor = BeaconSender::Start(loop, o);
  ASSERT_TRUE(impostor.ok()) << impostor.status().ToString();
  o.token = kBeaconToken;
  o.info.server_id = "the-real-one";
  Result<std::unique_ptr<BeaconSender>> real = BeaconSender::Start(loop, o);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_EQ((*real)->sent(), 1u);

  std::vector<std::pair<std::string, Status>> rejected;
  Result<DiscoveredServer> found = (*listener)->Next(
      kBeaconToken, Seconds(20), clock,
      [&](const std::string& from, const Status& why) { rejected.emplace_back(from, why); });
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->info.server_id, "the-real-one");
  EXPECT_EQ(found->from, "127.0.0.1");
  // The sender's own address first, then the other announced ones.
  EXPECT_EQ(found->servers, (std::vector<std::string>{"127.0.0.1:7210", "10.213.0.10:7210"}));
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_TRUE(rejected[0].first.starts_with("127.0.0.1:")) << rejected[0].first;
  EXPECT_EQ(rejected[0].second.code(), StatusCode::kUnauthenticated);
}

TEST(BeaconTest, ListenerTimesOutWhenNothingVerifies) {
  Result<std::unique_ptr<BeaconListener>> listener = BeaconListener::Open(0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  RealClock clock;
  Result<DiscoveredServer> found =
      (*listener)->Next(kBeaconToken, Millis(50), clock, [](const std::string&, const Status&) {});
  EXPECT_EQ(found.status().code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace drover::net
