// Server (server.h): construction, registering routes and public paths,
// and what it tells about itself (port, fingerprint, connections, body
// bytes), with CloseConnectionsOf. The rest of Server is split by concept
// around the state all parts share (Server::State, server_state.h):
//
//   server_routing.cc    identity, the routing decision, AnswerInMemory
//   server_admission.cc  connections without the token: the cap, the log
//   server_listen.cc     Start, Stop, the accept loops
//   http_session.cc      each HTTP connection (the only Beast file here)
//   upload_sink.cc       upload routes' bodies to files
//   file_send.cc         file responses' bodies from disk
//
// Threading: as Server (server.h): the loop thread, or before it runs;
// body_bytes_sent/received from any thread.

#include "net/server.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/connection.h"
#include "net/server_state.h"
#include "net/upload_sink.h"

namespace drover::net {

using internal::Connection;

Server::Server(EventLoop& loop, ServerOptions options)
    : state_(std::make_shared<State>(loop, std::move(options))) {}

Server::~Server() { Stop(); }

void Server::Route(std::string method, std::string pattern, Handler handler) {
  state_->http_routes.Add(std::move(method), std::move(pattern), std::move(handler));
}

void Server::WebSocketRoute(std::string pattern, WsOpenHandler on_open, WsToken token) {
  state_->ws_routes.Add("GET", std::move(pattern), internal::WsRoute{std::move(on_open), token});
}

void Server::UploadRoute(std::string method, std::string pattern, std::string dir,
                         uint64_t max_bytes, UploadHandler handler) {
  state_->header_body_limit = std::max(state_->header_body_limit, max_bytes);
  state_->upload_routes.Add(std::move(method), std::move(pattern),
                            internal::UploadRouteEntry{std::move(dir), max_bytes, std::move(handler)});
}

void Server::ServeLocalSocket(LocalSocketListener listener) {
  state_->local_listener.emplace(std::move(listener));
}

const std::string& Server::local_socket() const {
  static const std::string kNone;
  return state_->local_listener ? state_->local_listener->path() : kNone;
}

void Server::AllowPublic(std::string path_or_prefix) {
  state_->public_paths.push_back(std::move(path_or_prefix));
}

uint16_t Server::port() const { return state_->port; }

const std::string& Server::fingerprint() const { return state_->fingerprint; }

size_t Server::connection_count() const { return state_->connections.size(); }

size_t Server::CloseConnectionsOf(const std::string& name) {
  State& st = *state_;
  std::vector<std::shared_ptr<Connection>> doomed;
  for (const auto& [id, user] : st.connection_users) {
    if (user != name) continue;
    auto it = st.connections.find(id);
    if (it == st.connections.end()) continue;
    if (auto c = it->second.lock()) doomed.push_back(std::move(c));
  }
  // Closing may erase entries: collected first.
  for (const std::shared_ptr<Connection>& c : doomed) {
    if (auto* ws = dynamic_cast<WsSession*>(c.get())) {
      ws->Close("access revoked for " + name);
    } else {
      c->Abort();
    }
  }
  return doomed.size();
}

uint64_t Server::body_bytes_sent() const {
  return state_->body_bytes_sent.load(std::memory_order_relaxed);
}

uint64_t Server::body_bytes_received() const {
  return state_->body_bytes_received.load(std::memory_order_relaxed);
}

}  // namespace drover::net
