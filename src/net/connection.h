// Internal to src/net: what the server keeps of each open connection, an
// HTTP one (http_session.cc) or a WebSocket (WsSessionImpl): an id and a way
// to drop it at once (Server::Stop, CloseConnectionsOf, admission); and a
// TCP peer as text for logs. Apart from ws_session_impl.h so that the parts
// of the server that only count and close connections (server.cc,
// server_admission.cc, server_listen.cc) compile without Beast.
//
// Threading: NextConnectionId and EndpointText from any thread; Abort on
// the loop thread.
#ifndef DROVER_NET_CONNECTION_H_
#define DROVER_NET_CONNECTION_H_

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

#include "net/connection_id.h"

namespace drover::net::internal {

inline std::string EndpointText(const boost::asio::ip::tcp::endpoint& ep) {
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

// Something the server can drop at once when it stops.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void Abort() = 0;
};

}  // namespace drover::net::internal

#endif  // DROVER_NET_CONNECTION_H_
