// Where and how a client (the CLI's HttpClient, the worker's WebSocket)
// reaches a server: address, TLS with a pinned fingerprint or plain TCP, the
// cluster token, and limits.
//
// Thread safety: plain values.
#ifndef DROVER_NET_CLIENT_OPTIONS_H_
#define DROVER_NET_CLIENT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "net/access_file.h"

namespace drover::net {

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7210;
  // The cluster's other servers (standbys, or the leader when host:port is
  // a standby), tried in order after host:port by clients that fail over
  // (cli::ApiClient, the worker). HttpClient and ConnectWebSocket use
  // host:port only.
  std::vector<HostPort> alternates;
  bool tls = true;
  std::string fingerprint;  // required with tls; any form NormalizeFingerprint takes
  // The server's local socket (local_socket.h) on this machine: when set,
  // HttpClient and the WebSocket clients connect there, in plain HTTP,
  // instead of to host:port (tls and fingerprint then do not apply; the
  // token is sent as always). Whoever sets it has checked it is the same
  // server's (cli::ResolveConnection).
  std::string local_socket;
  std::string token;
  // Connect + TLS + WebSocket handshake, and for HttpClient each request.
  Duration timeout = Seconds(30);
  size_t max_response_bytes = 256 * 1024 * 1024;
  // WebSocket only: largest incoming message, unsent-bytes cap, and how
  // long a silent connection may stay (pings are sent at half of it; zero
  // disables).
  size_t max_ws_message_bytes = 16 * 1024 * 1024;
  size_t max_ws_queue_bytes = 64 * 1024 * 1024;
  Duration ws_idle_timeout = Seconds(30);
};

// Options from an access file: its first address, the others as
// alternates. Fails with kInvalidArgument for a bad address.
Result<ClientOptions> ClientOptionsFromAccess(const AccessInfo& access);

}  // namespace drover::net

#endif  // DROVER_NET_CLIENT_OPTIONS_H_
