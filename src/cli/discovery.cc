#include "cli/discovery.h"

#include <spdlog/spdlog.h>

#include "cli/cli11.h"
#include <iostream>

#include "common/quantity.h"

namespace drover::cli {
namespace {

bool IsLoopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1" || address == "localhost";
}

}  // namespace

void AddBeaconFlags(CLI::App& app, BeaconFlags& flags) {
  app.add_option("--beacon-port", flags.port, "UDP port of the discovery beacon")
      ->capture_default_str();
  app.add_option("--beacon-interval", flags.interval, "How often the beacon is sent")
      ->capture_default_str();
  app.add_option("--beacon-to", flags.to,
                 "Send the beacon to this IPv4 address instead of every interface's broadcast "
                 "address (repeatable)");
  app.add_flag("--no-beacon", flags.off, "Do not announce this server on the LAN");
}

Result<std::unique_ptr<net::BeaconSender>> StartBeacon(net::EventLoop& loop,
                                                       const BeaconFlags& flags,
                                                       const server::ServerShell& shell,
                                                       const server::ServerConfig& config,
                                                       const Clock& clock) {
  if (flags.off) return std::unique_ptr<net::BeaconSender>();
  Result<Duration> interval = ParseDuration(flags.interval);
  if (!interval.ok()) return interval.status().WithContext("--beacon-interval");
  if (*interval <= Duration::zero()) return InvalidArgument("--beacon-interval: must be above 0");
  if (flags.port == 0) return InvalidArgument("--beacon-port: must not be 0");
  if (IsLoopback(config.bind_address) && flags.to.empty()) {
    spdlog::info("beacon: off, the server listens on {} only", config.bind_address);
    return std::unique_ptr<net::BeaconSender>();
  }
  net::BeaconSenderOptions options;
  options.port = flags.port;
  options.interval = *interval;
  options.destinations = flags.to;
  options.info.server_id = shell.server_id();
  if (config.bind_address != "0.0.0.0" && config.bind_address != "::") {
    options.info.addresses = {config.bind_address};
  }
  options.info.port = shell.port();
  options.info.tls = config.tls;
  options.info.fingerprint = shell.fingerprint();
  options.token = shell.token();
  options.clock = &clock;
  Result<std::unique_ptr<net::BeaconSender>> sender = net::BeaconSender::Start(loop, options);
  if (!sender.ok()) return sender.status().WithContext("--beacon-*");
  std::cout << "drover: beacon on UDP port " << flags.port << " every " << flags.interval
            << std::endl;
  return sender;
}

Status DiscoverServer(uint16_t port, Duration timeout, worker::AgentConfig& config) {
  if (config.token.empty()) {
    return InvalidArgument("--discover needs the cluster token (--token or --token-file)");
  }
  Result<std::unique_ptr<net::BeaconListener>> listener = net::BeaconListener::Open(port);
  if (!listener.ok()) return listener.status().WithContext("--discover");
  std::cout << "drover: waiting for a server's beacon on UDP port " << (*listener)->port()
            << std::endl;
  Clock& clock = SystemClock();
  Result<net::DiscoveredServer> found = (*listener)->Next(
      config.token, timeout, clock, [](const std::string& from, const Status& why) {
        spdlog::warn("discovery: ignored a beacon from {}: {}", from, why.ToString());
      });
  if (!found.ok()) return found.status().WithContext("--discover");
  std::cout << "drover: discovered server " << found->info.server_id << " at " << found->servers[0]
            << " (beacon from " << found->from << ")" << std::endl;
  config.servers = found->servers;
  config.tls = found->info.tls;
  config.fingerprint = found->info.fingerprint;
  return Status::Ok();
}

}  // namespace drover::cli
