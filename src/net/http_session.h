// Internal to src/net: serving one accepted connection of Server. The
// session itself, a template over the stream (TLS over TCP, plain TCP, the
// local socket), lives in http_session.cc, the one file of the server that
// instantiates Beast's reads and writes; the accept loops
// (server_listen.cc) hand it sockets through these functions and so
// compile without Beast.
//
// Threading: the loop thread.
#ifndef DROVER_NET_HTTP_SESSION_H_
#define DROVER_NET_HTTP_SESSION_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <memory>
#include <string>

#include "net/server_state.h"

namespace drover::net::internal {

// Serves a connection accepted on the TCP port: over TLS when the server
// has a TLS context (Server::State::tls), else plain HTTP. `remote` names
// the peer in logs and in Request::remote.
void StartHttpSession(const std::shared_ptr<Server::State>& state,
                      boost::asio::ip::tcp::socket socket, std::string remote);

// Serves a connection accepted on the local socket: plain HTTP, the peer
// named "local".
void StartHttpSession(const std::shared_ptr<Server::State>& state,
                      boost::asio::local::stream_protocol::socket socket);

}  // namespace drover::net::internal

#endif  // DROVER_NET_HTTP_SESSION_H_
