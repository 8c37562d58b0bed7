// LAN discovery: a server announces itself with a UDP broadcast beacon, and
// `drover worker --discover` joins the first server whose beacon proves it
// knows the cluster token (DESIGN.md section 7, docs/lan.md).
//
// A beacon is one datagram:
//
//   drover-beacon/1 <HMAC-SHA256 of PAYLOAD keyed with the token, 64 hex>\n
//   PAYLOAD = {"server_id":..,"addresses":[..],"port":..,"tls":..,
//              "fingerprint":..,"time_ms":..}
//
// The HMAC covers the exact payload bytes, so a receiver never re-encodes
// JSON to check it. It authenticates the fingerprint too: a worker that
// knows the token can pin the certificate the beacon names. A beacon whose
// time is further than `max_age` from the receiver's clock (either way) is
// rejected as stale: a recorded beacon cannot be replayed later to point
// workers at an address the server has left. Nothing in a beacon is secret
// (the token never travels).
//
// Thread safety: EncodeBeacon/DecodeBeacon are plain functions. A
// BeaconSender belongs to its EventLoop's thread; a BeaconListener to the
// thread that uses it.
#ifndef DROVER_NET_BEACON_H_
#define DROVER_NET_BEACON_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "net/event_loop.h"

namespace drover::net {

inline constexpr uint16_t kDefaultBeaconPort = 7947;
// Clocks of machines on one LAN agree within far less; a beacon this old
// (or this far in the future) is refused.
inline constexpr Duration kBeaconMaxAge = Seconds(30);
// Largest datagram a receiver reads; a beacon is a few hundred bytes.
inline constexpr size_t kMaxBeaconBytes = 4096;

struct BeaconInfo {
  std::string server_id;               // stable id of the server (its state dir)
  std::vector<std::string> addresses;  // IPv4/IPv6 literals the server listens on
  uint16_t port = 0;                   // its API / worker port
  bool tls = true;
  std::string fingerprint;  // SHA-256 of its certificate (64 hex) with tls
  Time sent{};              // when the datagram was made
};

// The datagram for `info`, signed with `token`.
std::string EncodeBeacon(const BeaconInfo& info, std::string_view token);

// Checks and parses a datagram. Errors (the message says which):
//   InvalidArgument   not a beacon, bad JSON, missing or bad fields;
//   Unauthenticated   the HMAC does not match (a wrong token or a payload
//                     changed on the way);
//   FailedPrecondition  stale: `sent` is more than `max_age` away from `now`.
// The HMAC is checked before the payload is parsed or its time trusted.
Result<BeaconInfo> DecodeBeacon(std::string_view datagram, std::string_view token, Time now,
                                Duration max_age = kBeaconMaxAge);

// The IPv4 addresses of this host's interfaces that are up, not loopback,
// with their broadcast address (getifaddrs).
struct InterfaceAddress {
  std::string name;       // "eth0"
  std::string address;    // "10.213.0.10"
  std::string broadcast;  // "10.213.0.255"; empty without IFF_BROADCAST
};
Result<std::vector<InterfaceAddress>> ListInterfaceAddresses();

struct BeaconSenderOptions {
  uint16_t port = kDefaultBeaconPort;  // destination UDP port
  Duration interval = Seconds(1);
  // Destination addresses; empty: the broadcast address of every interface
  // ListInterfaceAddresses reports, looked up again before each send so an
  // interface that comes up later is covered.
  std::vector<std::string> destinations;
  // What to announce; `addresses` empty: the interfaces' addresses, looked
  // up before each send. `sent` is set on each send.
  BeaconInfo info;
  std::string token;
  const Clock* clock = nullptr;  // required; must outlive the sender
};

class BeaconSender {
 public:
  // Opens a UDP socket with SO_BROADCAST and sends the first beacon at once,
  // then one every interval until destroyed. Fails with InvalidArgument for
  // a zero interval, a bad destination, no token or no clock, and with
  // Unavailable when the socket cannot be made. A failed send (no route
  // yet, interface down) is logged once per change of the error and retried
  // at the next interval.
  static Result<std::unique_ptr<BeaconSender>> Start(EventLoop& loop, BeaconSenderOptions options);
  ~BeaconSender();
  BeaconSender(const BeaconSender&) = delete;
  BeaconSender& operator=(const BeaconSender&) = delete;

  // Beacons sent so far (one per destination per interval).
  uint64_t sent() const { return sent_; }

 private:
  BeaconSender(EventLoop& loop, BeaconSenderOptions options, int fd);
  void SendNow();

  BeaconSenderOptions options_;
  int fd_;
  Timer timer_;
  uint64_t sent_ = 0;
  std::string last_error_;
};

// A server found by a beacon.
struct DiscoveredServer {
  BeaconInfo info;
  std::string from;  // the sender's IP address
  // "host:port" to try in turn: the sender's address first when the beacon
  // announces it (it is on the receiver's network), then the others.
  std::vector<std::string> servers;
};

class BeaconListener {
 public:
  // Binds UDP `port` on all addresses with SO_REUSEADDR (several workers on
  // one host may listen; each gets every broadcast). Port 0 picks a free
  // one (tests). Fails with Unavailable when it cannot bind.
  static Result<std::unique_ptr<BeaconListener>> Open(uint16_t port);
  ~BeaconListener();
  BeaconListener(const BeaconListener&) = delete;
  BeaconListener& operator=(const BeaconListener&) = delete;

  uint16_t port() const { return port_; }

  // Called for each datagram that does not verify, with the sender
  // ("10.213.0.30:40001") and why.
  using RejectFn = std::function<void(const std::string& from, const Status& why)>;

  // Blocks until a beacon verifies with `token` (returned) or `timeout`
  // passes (DeadlineExceeded; zero or negative: wait forever). Every
  // rejected datagram goes to `on_reject`.
  Result<DiscoveredServer> Next(std::string_view token, Duration timeout, const Clock& clock,
                                const RejectFn& on_reject, Duration max_age = kBeaconMaxAge);

 private:
  BeaconListener(int fd, uint16_t port) : fd_(fd), port_(port) {}
  int fd_;
  uint16_t port_;
};

}  // namespace drover::net

#endif  // DROVER_NET_BEACON_H_
