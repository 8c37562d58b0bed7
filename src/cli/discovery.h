// LAN discovery for the drover command: the server's beacon flags and
// sender (`drover server --beacon-port/--beacon-interval/--no-beacon`), and
// the worker's `--discover` (net/beacon.h, docs/lan.md).
//
// Thread safety: main thread (the sender then lives on the server's loop).
#ifndef DROVER_CLI_DISCOVERY_H_
#define DROVER_CLI_DISCOVERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/beacon.h"
#include "net/event_loop.h"
#include "server/server_shell.h"
#include "worker/agent/agent.h"

namespace CLI {
class App;
}

namespace drover::cli {

struct BeaconFlags {
  uint16_t port = net::kDefaultBeaconPort;
  std::string interval = "1s";
  bool off = false;
  std::vector<std::string> to;  // explicit destinations; empty: broadcast
};

// Adds --beacon-port, --beacon-interval, --beacon-to and --no-beacon.
void AddBeaconFlags(CLI::App& app, BeaconFlags& flags);

// Starts announcing `shell` on the LAN unless --no-beacon, or the server
// listens on a loopback address only (no other machine could reach it;
// logged). Returns null then. kInvalidArgument names a bad flag.
Result<std::unique_ptr<net::BeaconSender>> StartBeacon(net::EventLoop& loop,
                                                       const BeaconFlags& flags,
                                                       const server::ServerShell& shell,
                                                       const server::ServerConfig& config,
                                                       const Clock& clock);

// `drover worker --discover`: waits (up to `timeout`; zero = forever) for a
// beacon that verifies with `config.token` on UDP `port`, logging every
// rejected one with its sender, then fills config.servers, tls and
// fingerprint from it. Errors: the port cannot be bound, no token, or the
// timeout (kDeadlineExceeded).
Status DiscoverServer(uint16_t port, Duration timeout, worker::AgentConfig& config);

}  // namespace drover::cli

#endif  // DROVER_CLI_DISCOVERY_H_
