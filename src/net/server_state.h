// Internal to src/net: Server::State, what every part of the server shares:
// the options and routes, the two listeners (the TCP port, the local
// socket) with their admission bookkeeping, the open connections and the
// body byte counters. Server holds it by shared_ptr, and so does every
// connection and pending accept, so one that outlives Server::Stop() still
// finds it.
//
// Its functions are defined by concept: identity and routing in
// server_routing.cc (with the decision on a request's header,
// server_routing.h), admission of connections without the token in
// server_admission.cc; listening is server_listen.cc, the connections
// http_session.cc. Asio appears here (the TLS context, the acceptors, the
// accept pauses' timers), Beast does not.
//
// Threading: the loop thread only, except body_bytes_sent/received
// (atomics, read from any thread for metrics).
#ifndef DROVER_NET_SERVER_STATE_H_
#define DROVER_NET_SERVER_STATE_H_

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/time.h"
#include "net/accept_pause.h"
#include "net/connection.h"
#include "net/event_loop_asio.h"
#include "net/router.h"
#include "net/server.h"
#include "net/upload_sink.h"

namespace drover::net {

namespace internal {

// For the log limiters and the accept pauses, which count in wall time.
inline Time WallNow() { return SystemClock().Now(); }

struct WsRoute {
  WsOpenHandler on_open;
  WsToken token;
};

}  // namespace internal

struct Server::State {
  State(EventLoop& l, ServerOptions o) : loop(l), io(IoContextOf(l)), options(std::move(o)) {}

  // The TCP port and the local socket, each with its own accept pause and
  // its own set of connections that have not sent the token yet.
  static constexpr size_t kTcp = 0;
  static constexpr size_t kLocal = 1;
  struct Listener {
    const char* name;
    AcceptPause pause;
    std::optional<boost::asio::steady_timer> retry;
    // Oldest first: connection ids only grow.
    std::map<uint64_t, std::weak_ptr<internal::Connection>> unauthenticated;
  };

  EventLoop& loop;
  boost::asio::io_context& io;
  ServerOptions options;
  Router<Handler> http_routes;
  Router<internal::WsRoute> ws_routes;
  Router<internal::UploadRouteEntry> upload_routes;
  // The body limit while a header is read: Beast refuses a Content-Length
  // over it at the header, before the route (an upload's own limit) is
  // known. The larger of max_body_bytes and every upload route's limit.
  uint64_t header_body_limit = 0;
  std::array<Listener, 2> listeners{Listener{"the TCP port"}, Listener{"the local socket"}};
  size_t max_unauthenticated = 16;
  LogLimiter peer_log;  // lines about connections without the token
  LogLimiter push_log;  // lines about connections pushed out
  std::vector<std::string> public_paths;
  std::optional<boost::asio::ssl::context> tls;
  std::string fingerprint;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  // The local socket (ServeLocalSocket): the claim (path, lock) and the
  // acceptor that owns its descriptor once Start() ran.
  std::optional<LocalSocketListener> local_listener;
  std::optional<boost::asio::local::stream_protocol::acceptor> local_acceptor;
  uint16_t port = 0;
  bool stopped = false;
  std::map<uint64_t, std::weak_ptr<internal::Connection>> connections;
  // The user each authenticated connection sent a token of, by connection
  // id (CloseConnectionsOf); erased with the connection.
  std::map<uint64_t, std::string> connection_users;
  // Server::body_bytes_sent / body_bytes_received; atomic because metrics
  // may read them from another thread.
  std::atomic<uint64_t> body_bytes_sent{0};
  std::atomic<uint64_t> body_bytes_received{0};

  // ---- Identity and routing (server_routing.cc) ----

  // Whether `path` was passed to AllowPublic (exactly, or under a "/*").
  bool IsPublic(const std::string& path) const;

  // Who `token` belongs to: ServerOptions::authenticate, or the one token.
  std::shared_ptr<const Identity> IdentityOf(std::string_view token) const;

  // Routes a complete request to its handler, or answers 404 / 405.
  void Dispatch(Request& request, Responder done) const;

  // The answer to a failed read of a request, and why (for the log); nullopt
  // when the connection is just dropped (the peer went away or timed out).
  std::optional<std::pair<Response, std::string>> AnswerReadError(
      boost::system::error_code ec) const;

  // "the path" or "query parameter \"x\"" when that part of the decoded
  // request is not clean text (IsCleanText); empty when all are.
  static std::string UncleanPart(const Request& request);

  static Response Unauthorized();

  // ---- Admission of connections without the token (server_admission.cc) ----

  // A line about a peer: as it is for one that sent the token, at most one
  // per 10 s (with a count) for connections without it, which anyone who
  // can reach the port can open by the thousand.
  void LogPeer(bool authenticated, spdlog::level::level_enum level, const std::string& line);

  // Closes the oldest connection without the token, of listener `first` or
  // else of the other one. False when there is none.
  bool PushOutOldest(size_t first);

  // Counts a new connection on `listener` as one without the token, pushing
  // out the oldest such one at the cap.
  void Admit(size_t listener, uint64_t id, std::weak_ptr<internal::Connection> c);
};

}  // namespace drover::net

#endif  // DROVER_NET_SERVER_STATE_H_
