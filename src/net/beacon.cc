#include "net/beacon.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace drover::net {
namespace {

constexpr std::string_view kMagic = "drover-beacon/1 ";
constexpr size_t kHmacHex = 64;

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kDigits[mac[i] >> 4]);
    hex.push_back(kDigits[mac[i] & 15]);
  }
  return hex;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// "a.b.c.d:port" or "[v6]:port".
std::string AddressText(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
  inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6.sin6_port));
}

std::string JoinHostPort(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

}  // namespace

std::string EncodeBeacon(const BeaconInfo& info, std::string_view token) {
  nlohmann::json j = {{"server_id", info.server_id},
                      {"addresses", info.addresses},
                      {"port", info.port},
                      {"tls", info.tls},
                      {"fingerprint", info.fingerprint},
                      {"time_ms", ToMicros(info.sent) / 1000}};
  const std::string payload = j.dump();
  return std::string(kMagic) + Hmac(token, payload) + "\n" + payload;
}

Result<BeaconInfo> DecodeBeacon(std::string_view datagram, std::string_view token, Time now,
                                Duration max_age) {
  if (!datagram.starts_with(kMagic) || datagram.size() < kMagic.size() + kHmacHex + 1 ||
      datagram[kMagic.size() + kHmacHex] != '\n') {
    return InvalidArgument("not a drover beacon (" + std::to_string(datagram.size()) + " bytes)");
  }
  const std::string_view mac = datagram.substr(kMagic.size(), kHmacHex);
  const std::string_view payload = datagram.substr(kMagic.size() + kHmacHex + 1);
  const std::string expected = Hmac(token, payload);
  if (CRYPTO_memcmp(mac.data(), expected.data(), kHmacHex) != 0) {
    return Unauthenticated("bad HMAC: signed with another cluster token, or changed on the way");
  }
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("beacon payload is not a JSON object");
  BeaconInfo info;
  try {
    info.server_id = j.at("server_id").get<std::string>();
    info.addresses = j.at("addresses").get<std::vector<std::string>>();
    info.port = j.at("port").get<uint16_t>();
    info.tls = j.at("tls").get<bool>();
    info.fingerprint = j.at("fingerprint").get<std::string>();
    info.sent = TimeFromMicros(j.at("time_ms").get<int64_t>() * 1000);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("beacon payload: ") + e.what());
  }
  if (info.port == 0) return InvalidArgument("beacon payload: port 0");
  if (info.addresses.empty()) return InvalidArgument("beacon payload: no address");
  if (info.tls && info.fingerprint.empty()) {
    return InvalidArgument("beacon payload: tls without a fingerprint");
  }
  const Duration age = now - info.sent;
  if (age > max_age || -age > max_age) {
    return FailedPrecondition("stale beacon: sent " + std::to_string(age.count() / 1000) +
                              " ms from now, more than the " +
                              std::to_string(max_age.count() / 1000000) + " s allowed (a replay, "
                              "or clocks out of step)");
  }
  return info;
}

Result<std::vector<InterfaceAddress>> ListInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Unavailable(Errno("getifaddrs"));
  std::vector<InterfaceAddress> out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    InterfaceAddress a;
    a.name = i->ifa_name;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof text);
    a.address = text;
    if ((i->ifa_flags & IFF_BROADCAST) != 0 && i->ifa_broadaddr != nullptr) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_broadaddr)->sin_addr, text,
                sizeof text);
      a.broadcast = text;
    }
    out.push_back(std::move(a));
  }
  freeifaddrs(list);
  return out;
}

// ---- BeaconSender ----------------------------------------------------------

Result<std::unique_ptr<BeaconSender>> BeaconSender::Start(EventLoop& loop,
                                                          BeaconSenderOptions options) {
  if (options.interval <= Duration::zero()) return InvalidArgument("beacon interval must be > 0");
  if (options.token.empty()) return InvalidArgument("beacon needs the cluster token");
  if (options.clock == nullptr) return InvalidArgument("beacon needs a clock");
  if (options.port == 0) return InvalidArgument("beacon port must not be 0");
  for (const std::string& d : options.destinations) {
    in_addr a{};
    if (inet_pton(AF_INET, d.c_str(), &a) != 1) {
      return InvalidArgument("beacon destination \"" + d + "\" is not an IPv4 address");
    }
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Unavailable(Errno("beacon socket"));
  const int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, sizeof on) != 0) {
    const Status s = Unavailable(Errno("beacon SO_BROADCAST"));
    ::close(fd);
    return s;
  }
  std::unique_ptr<BeaconSender> sender(new BeaconSender(loop, std::move(options), fd));
  sender->SendNow();
  return sender;
}

BeaconSender::BeaconSender(EventLoop& loop, BeaconSenderOptions options, int fd)
    : options_(std::move(options)), fd_(fd), timer_(loop) {}

BeaconSender::~BeaconSender() {
  timer_.Cancel();
  ::close(fd_);
}

void BeaconSender::SendNow() {
  std::vector<std::string> destinations = options_.destinations;
  BeaconInfo info = options_.info;
  if (destinations.empty() || info.addresses.empty()) {
    Result<std::vector<InterfaceAddress>> ifs = ListInterfaceAddresses();
    if (ifs.ok()) {
      for (const InterfaceAddress& i : *ifs) {
        if (options_.destinations.empty() && !i.broadcast.empty()) {
          destinations.push_back(i.broadcast);
        }
        if (options_.info.addresses.empty()) info.addresses.push_back(i.address);
      }
    }
  }
  info.sent = options_.clock->Now();
  std::string error;
  if (destinations.empty() || info.addresses.empty()) {
    error = "no network interface with a broadcast address is up";
  } else {
    const std::string datagram = EncodeBeacon(info, options_.token);
    for (const std::string& d : destinations) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(options_.port);
      inet_pton(AF_INET, d.c_str(), &to.sin_addr);
      if (::sendto(fd_, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&to),
                   sizeof to) < 0) {
        error = Errno("sending the beacon to " + d + ":" + std::to_string(options_.port));
      } else {
        ++sent_;
      }
    }
  }
  if (error != last_error_) {
    if (!error.empty()) {
      spdlog::warn("beacon: {}; retrying every {} ms", error, options_.interval.count() / 1000);
    } else if (!last_error_.empty()) {
      spdlog::info("beacon: sending again");
    }
    last_error_ = error;
  }
  timer_.ArmAfter(options_.interval, [this] { SendNow(); });
}

// ---- BeaconListener --------------------------------------------------------

Result<std::unique_ptr<BeaconListener>> BeaconListener::Open(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(Errno("beacon socket"));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const Status s = Unavailable(Errno("cannot listen for beacons on UDP port " +
                                       std::to_string(port)));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<BeaconListener>(new BeaconListener(fd, ntohs(addr.sin_port)));
}

BeaconListener::~BeaconListener() { ::close(fd_); }

Result<DiscoveredServer> BeaconListener::Next(std::string_view token, Duration timeout,
                                              const Clock& clock, const RejectFn& on_reject,
                                              Duration max_age) {
  const bool forever = timeout <= Duration::zero();
  const Deadline deadline(timeout);
  std::string buf(kMaxBeaconBytes, '\0');
  for (;;) {
    int wait_ms = -1;
    if (!forever) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
      if (left.count() <= 0) {
        return Status(StatusCode::kDeadlineExceeded,
                      "no beacon verified with the cluster token on UDP port " +
                          std::to_string(port_));
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno != EINTR) return Unavailable(Errno("waiting for beacons"));
    if (n <= 0) continue;
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t got = ::recvfrom(fd_, buf.data(), buf.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_len);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Unavailable(Errno("reading a beacon"));
    }
    const std::string sender = AddressText(from);
    Result<BeaconInfo> info =
        DecodeBeacon(std::string_view(buf.data(), static_cast<size_t>(got)), token, clock.Now(),
                     max_age);
    if (!info.ok()) {
      if (on_reject) on_reject(sender, info.status());
      continue;
    }
    DiscoveredServer found;
    found.from = sender.substr(0, sender.rfind(':'));
    if (found.from.starts_with("[")) found.from = found.from.substr(1, found.from.size() - 2);
    found.info = std::move(info).value();
    const auto& addrs = found.info.addresses;
    if (std::find(addrs.begin(), addrs.end(), found.from) != addrs.end()) {
      found.servers.push_back(JoinHostPort(found.from, found.info.port));
    }
    for (const std::string& a : addrs) {
      if (a != found.from) found.servers.push_back(JoinHostPort(a, found.info.port));
    }
    return found;
  }
}

}  // namespace drover::net
