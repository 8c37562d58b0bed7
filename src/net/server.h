// Server: the HTTP + WebSocket endpoint of `drover server`, one port, TLS or
// plain TCP, on an EventLoop.
//
//   Server server(loop, {.port = 7210, .tls = true, .cert_dir = state_dir,
//                        .token = token});
//   server.Route("GET", "/api/v1/jobs/{id}", [](const Request& r, Responder done) {
//     done(JsonResponse(...));
//   });
//   server.WebSocketRoute("/api/v1/worker", [](std::shared_ptr<WsSession> s,
//                                               const Request& r) { ... });
//   server.AllowPublic("/assets/*");
//   RETURN_IF_ERROR(server.Start());
//
// Authentication: every request needs `Authorization: Bearer <token>`,
// except paths passed to AllowPublic. WebSocket routes registered with
// WsToken::kHeaderOrQuery also take the token as a `?token=` query
// parameter, because browsers cannot set headers on a WebSocket; the others
// refuse a `?token=` (URLs end up in logs). A missing or wrong token gets
// 401 with {"error":{"code":"unauthenticated","message":...}} (WebSocket
// upgrades are refused the same way).
//
// Request bytes: a decoded path or query parameter that is not UTF-8 text
// or holds control characters (including NUL) is refused with 400 before
// routing, so handlers only see text. Error messages and log lines show
// what a peer sent through Printable (http_types.h); JSON bodies are made
// with JsonText (json_text.h), which never throws.
//
// Limits: header and body sizes (431 / 413 and the connection closed), a
// malformed request (400), WebSocket message size (that connection closed
// with code 1009; a frame that declares more is refused at its header), a
// handshake timeout and an idle timeout, so half-open connections are
// dropped. A malformed request or message closes only its own connection,
// with a logged reason (spdlog).
//
// Connections without the token: until a connection has sent a request (or
// an upgrade) with the token, it is held to the handshake timeout for each
// request, and at most `max_unauthenticated_connections` of them are kept
// per listener (the TCP port, the local socket): a new one pushes out the
// oldest. When accept fails for want of file descriptors (EMFILE, ENFILE)
// or memory, the oldest connection without the token is closed to make
// room and accepting pauses (10 ms, doubling to 1 s, see accept_pause.h)
// instead of spinning. So idle connections from the network cannot lock out
// workers, clients with the token, or the local socket. Log lines about
// peers without the token are limited to one per 10 s (with a count).
//
// Thread safety: construct, add routes and Start() before the loop runs or on
// the loop thread; handlers run on the loop thread. Stop() and the destructor
// belong to the loop thread or to a time when the loop is not running.
#ifndef DROVER_NET_SERVER_H_
#define DROVER_NET_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"
#include "net/event_loop.h"
#include "net/http_types.h"
#include "net/local_socket.h"
#include "net/ws_session.h"

namespace drover::net {

struct ServerLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 64 * 1024 * 1024;
  size_t max_ws_message_bytes = 16 * 1024 * 1024;
  // Unsent bytes a WebSocket may queue before it is closed as too slow.
  size_t max_ws_queue_bytes = 64 * 1024 * 1024;
  // For the TLS handshake and each request of a connection that has not
  // yet sent the token.
  Duration handshake_timeout = Seconds(5);
  Duration idle_timeout = Seconds(60);
  // Connections without the token kept per listener; 0 picks a quarter of
  // the open-file limit at Start() (at least 16, at most 1,024).
  size_t max_unauthenticated_connections = 0;
};

// Where a WebSocket route takes the cluster token from.
enum class WsToken {
  kHeader,         // Authorization: Bearer only (programs: the worker channel)
  kHeaderOrQuery,  // also ?token= (browsers cannot set WebSocket headers)
};

struct ServerOptions {
  std::string bind_address = "0.0.0.0";
  uint16_t port = 7210;  // 0 picks a free port; see Server::port()
  bool tls = true;
  std::string cert_dir;  // where server.crt / server.key live (tls only)
  std::string token;     // required, non-empty, unless `authenticate` is set
  ServerLimits limits;
  // Who a bearer token belongs to (users with roles, server/user_book.h);
  // nullopt refuses it (401). Unset: only `token` is accepted, as an
  // Identity{"", kAdmin}. Called on the loop thread for every request and
  // upgrade that carries a token.
  std::function<std::optional<Identity>(std::string_view token)> authenticate;
  // Whether the request's identity may use its route, asked after
  // authentication and before the body is read or an upgrade answered:
  // nullopt lets it through; a response (403) refuses it (and closes the
  // connection: its body is not read). Not asked for public paths without
  // a token.
  std::function<std::optional<Response>(const Request&)> authorize;
  // Told of every write: each request with a valid token whose method is
  // neither GET nor HEAD, once, with its answer, as the answer is sent
  // (refusals by `authorize` included; the request's body is empty here).
  // For the audit log (server/audit_log.h).
  std::function<void(const Request&, const Response&)> on_write;
};

// Called on the loop thread when a WebSocket upgrade on a registered path
// succeeded. Set the session's callbacks here; reading starts after return.
// Keep the shared_ptr to send later; the session stays alive while open.
using WsOpenHandler = std::function<void(std::shared_ptr<WsSession>, const Request&)>;

// A request body an upload route received, as a file (Server::UploadRoute).
struct Upload {
  std::string path;    // the temporary file in the route's directory, mode 0600
  uint64_t size = 0;   // bytes of the body
  std::string sha256;  // of the body, 64 lower-case hex digits
};
// Called on the loop thread once the whole body is in `upload.path`. The
// handler takes the file (renames it) or leaves it; whatever is left at
// that path once `done` is called is removed.
using UploadHandler = std::function<void(const Request&, const Upload&, Responder)>;

class Server {
 public:
  Server(EventLoop& loop, ServerOptions options);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // `pattern` as in router.h. Registering after Start() is allowed on the
  // loop thread.
  void Route(std::string method, std::string pattern, Handler handler);
  void WebSocketRoute(std::string pattern, WsOpenHandler on_open,
                      WsToken token = WsToken::kHeader);

  // A route whose body is streamed to a file instead of memory (the file
  // store's PUT /api/v1/files/{sha256}): after the header (token checked,
  // as for every route), the body is written piece by piece to a fresh
  // temporary file "<dir>/.upload-<random>" and hashed (SHA-256) on the
  // way; `handler` then gets the request (empty body), the file, its size
  // and hash. max_body_bytes does not apply; `max_bytes` does. Answers
  // without calling the handler, and leaves no file behind:
  //   411 without Content-Length (a chunked body is refused),
  //   413 for a Content-Length over `max_bytes`,
  //   507 when the disk is full (ENOSPC, EDQUOT: "no space left on
  //       device"), 500 for another write error,
  // each closing the connection; a peer that stops sending (the idle or
  // handshake timeout) or disconnects loses its partial file too.
  // AnswerInMemory answers such a route 501 (no file is written there).
  void UploadRoute(std::string method, std::string pattern, std::string dir, uint64_t max_bytes,
                   UploadHandler handler);

  // Exact paths, or prefixes written "/assets/*", served without a token.
  void AllowPublic(std::string path_or_prefix);

  // Also serves the same routes, as plain HTTP with the same token check, on
  // the claimed local socket (local_socket.h). Call before Start(), which
  // starts accepting on it; Stop() closes it and removes its file.
  void ServeLocalSocket(LocalSocketListener listener);

  // The local socket's path; empty when there is none.
  const std::string& local_socket() const;

  // Loads or makes the TLS identity (tls only), binds and listens. Fails with
  // kInvalidArgument for an empty token or a bad bind address, kUnavailable
  // if the port cannot be bound (message names address and port), and the
  // errors of LoadOrCreateTlsIdentity.
  Status Start();

  // Closes the listener and drops every open connection. Idempotent.
  void Stop();

  // Answers one request held whole in `raw` (the bytes a client would send)
  // as a connection would: the same parser and limits, token check, routing
  // and handler, without sockets or the event loop (the fuzz target
  // fuzz/http_fuzz.cc uses it). `done` gets the answer, status 101 for an
  // accepted WebSocket upgrade (not performed), or nullopt where the server
  // would drop the connection without one (an incomplete request). Handlers
  // answer through `done` as they do on a connection, possibly later.
  void AnswerInMemory(std::string_view raw, std::function<void(std::optional<Response>)> done);

  // The bound port (after Start(); useful with port 0).
  uint16_t port() const;

  // The certificate fingerprint clients must pin; empty without TLS.
  const std::string& fingerprint() const;

  // Open connections (HTTP and WebSocket), for metrics and tests.
  size_t connection_count() const;

  // Closes at once every connection (keep-alive HTTP and WebSocket) that
  // authenticated as user `name` (Identity::name): a revoked token must
  // not keep an event stream or a worker session open. A WebSocket gets
  // a close frame saying so. Returns how many were closed.
  size_t CloseConnectionsOf(const std::string& name);

  // Bytes of HTTP bodies this server has sent (responses written in full,
  // files of Response::file_path included, error answers too) and received
  // (request bodies read in full), on the TCP port and the local socket,
  // since construction. Headers, TLS framing, WebSocket messages and
  // AnswerInMemory are not counted. For metrics: they show, for example,
  // that file transfers went peer to peer and not through the server. Safe
  // to read from any thread.
  uint64_t body_bytes_sent() const;
  uint64_t body_bytes_received() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace drover::net

#endif  // DROVER_NET_SERVER_H_
