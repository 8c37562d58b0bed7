// HttpSession: one HTTP connection of Server, a template over its stream
// (TLS over TCP, plain TCP, the local socket). It reads requests one at a
// time, header first, so that identity and routing (server_routing.h) are
// decided before a large body is read; answers through a Responder (500 if
// a handler drops it unanswered); streams an upload route's body to an
// UploadSink and a file response's body from a FileSend; and on a
// WebSocket upgrade hands its stream over to a WsSessionImpl. Until a
// request carried the token, each step has the handshake timeout and the
// connection counts against admission (server_admission.cc).
//
// The only file of the server that instantiates Beast's reads and writes
// (once per stream type, a minute of compiling): keep what does not need
// them elsewhere.
//
// Threading: every member runs on the loop thread; a Responder may be
// called from any thread and posts there (PostReply).

#include "net/http_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "net/file_send.h"
#include "net/server_routing.h"
#include "net/upload_sink.h"
#include "net/ws_session_impl.h"

namespace drover::net::internal {

namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using beast::error_code;

namespace {

using ServerState = Server::State;

template <class Stream>
class HttpSession final : public Connection, public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  HttpSession(std::shared_ptr<ServerState> state, size_t listener, Stream stream, std::string remote)
      : state_(std::move(state)), listener_(listener), stream_(std::move(stream)), remote_(std::move(remote)) {}

  ~HttpSession() override {
    state_->connections.erase(id_);
    state_->connection_users.erase(id_);
    state_->listeners[listener_].unauthenticated.erase(id_);
  }

  void Start() {
    state_->connections[id_] = this->weak_from_this();
    state_->Admit(listener_, id_, this->weak_from_this());
    if constexpr (kTls) {
      Lowest().expires_after(state_->options.limits.handshake_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](error_code ec) {
        if (ec) {
          self->Drop("TLS handshake failed: " + ec.message());
          return;
        }
        self->ReadHeader();
      });
    } else {
      ReadHeader();
    }
  }

  void Abort() override {
    if (upgraded_) return;
    error_code ignored;
    Lowest().socket().close(ignored);
  }

  // Thread-safe: hops to the loop thread.
  void PostReply(Response response, bool keep_alive) {
    asio::post(state_->io, [self = this->shared_from_this(), r = std::move(response), keep_alive]() mutable {
      self->WriteResponse(std::move(r), keep_alive);
    });
  }

 private:
  auto& Lowest() { return beast::get_lowest_layer(stream_); }

  // A connection that has not sent the token gets the handshake timeout
  // for each step, so it cannot hold a descriptor for long.
  Duration Timeout() const {
    const ServerLimits& limits = state_->options.limits;
    return authenticated_ ? limits.idle_timeout : limits.handshake_timeout;
  }

  void ReadHeader() {
    const ServerLimits& limits = state_->options.limits;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits.max_header_bytes));
    parser_->body_limit(std::max<uint64_t>(limits.max_body_bytes, state_->header_body_limit));
    Lowest().expires_after(Timeout());
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(error_code ec) {
    if (ec == http::error::end_of_stream) return Shutdown();
    if (ec == beast::error::timeout) return Drop("timed out waiting for a request");
    if (ec) return OnReadError(ec);

    using Kind = HeadDecision::Kind;
    HeadDecision d = Decide(*state_, parser_->get(), remote_, request_);
    if (d.authenticated && !authenticated_) {
      authenticated_ = true;
      state_->listeners[listener_].unauthenticated.erase(id_);
    }
    if (request_.identity) state_->connection_users[id_] = request_.identity->name;
    if (d.kind == Kind::kReject) {
      // Refused by ServerOptions::authorize: a write that is recorded too.
      if (d.response.status == 403 && IsAuditedWrite())
        state_->options.on_write(request_, d.response);
      return Reject(std::move(d.response), d.why);
    }
    if (d.kind == Kind::kUpgrade) return Upgrade(*d.on_open);
    if (d.kind == Kind::kUpload) return StartUpload(*d.upload);
    const uint64_t max_body = state_->options.limits.max_body_bytes;
    if (const auto length = parser_->content_length(); length && *length > max_body) {
      return OnReadError(http::error::body_limit);
    }
    parser_->body_limit(max_body);
    if (parser_->is_done()) return Dispatch();
    Lowest().expires_after(Timeout());
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](error_code ec, size_t) {
      self->OnBody(ec);
    });
  }

  void OnBody(error_code ec) {
    if (ec == beast::error::timeout) return Drop("timed out reading the request body");
    if (ec) return OnReadError(ec);
    request_.body = std::move(parser_->get().body());
    Dispatch();
  }

  // A request that cannot be read is answered (413, 431, 400) when the
  // peer can still hear it, and the connection closed.
  void OnReadError(error_code ec) {
    if (auto answer = state_->AnswerReadError(ec)) {
      return Reject(std::move(answer->first), answer->second);
    }
    Drop("read failed: " + ec.message());
  }

  // UploadRoute: the body goes to an UploadSink (a temporary file in the
  // route's directory, hashed on the way), 1 MiB at a time; the handler
  // gets the file once the body is complete.
  void StartUpload(const UploadRouteEntry& route) {
    const auto length = parser_->content_length();
    upload_ = std::make_unique<UploadSink>(route);
    if (std::optional<UploadRefusal> refused =
            upload_->Open(length ? std::optional<uint64_t>(*length) : std::nullopt)) {
      return Reject(std::move(refused->response), refused->why);
    }
    upload_parser_.emplace(std::move(*parser_));
    upload_parser_->body_limit(route.max_bytes);
    ReadUploadStep();
  }

  void ReadUploadStep() {
    if (upload_parser_->is_done()) return FinishUpload();
    upload_parser_->get().body().data = upload_->buffer();
    upload_parser_->get().body().size = upload_->buffer_size();
    // Each piece has its own deadline: a slow but moving peer is not cut.
    Lowest().expires_after(Timeout());
    http::async_read_some(
        stream_, buffer_, *upload_parser_,
        [self = this->shared_from_this()](error_code ec, size_t) { self->OnUploadRead(ec); });
  }

  void OnUploadRead(error_code ec) {
    if (ec == http::error::need_buffer) ec = {};  // the buffer is full
    const size_t got = upload_->buffer_size() - upload_parser_->get().body().size;
    if (got > 0) {
      // The disk refused: answered, and the connection closed (the rest of
      // the body is not read).
      if (std::optional<UploadRefusal> refused = upload_->Write(got)) {
        return Reject(std::move(refused->response), refused->why);
      }
    }
    if (ec) {
      upload_->Discard();  // the partial file goes
      if (ec == beast::error::timeout) return Drop("timed out reading an upload");
      return OnReadError(ec);
    }
    ReadUploadStep();
  }

  void FinishUpload() {
    Upload upload;
    if (std::optional<UploadRefusal> refused = upload_->Finish(upload)) {
      return Reject(std::move(refused->response), refused->why);
    }
    const bool keep_alive = upload_parser_->get().keep_alive();
    upload_parser_.reset();
    state_->body_bytes_received.fetch_add(upload.size, std::memory_order_relaxed);
    Lowest().expires_never();  // the handler may take its time
    Responder inner = Audited(MakeResponder(keep_alive));
    Responder done = RemovingLeftover(upload.path, inner);
    UploadHandler handler = upload_->route().handler;
    handler(request_, upload, std::move(done));
  }

  void Dispatch() {
    const bool keep_alive = parser_->get().keep_alive();
    state_->body_bytes_received.fetch_add(request_.body.size(), std::memory_order_relaxed);
    Lowest().expires_never();  // the handler may take its time
    state_->Dispatch(request_, Audited(MakeResponder(keep_alive)));
  }

  // A write (ServerOptions::on_write): `done` that tells of its answer first.
  bool IsAuditedWrite() const {
    return state_->options.on_write && request_.identity && request_.method != "GET" &&
           request_.method != "HEAD";
  }
  Responder Audited(Responder done) {
    if (!IsAuditedWrite()) return done;
    auto seen = std::make_shared<Request>();
    seen->method = request_.method;
    seen->target = request_.target;
    seen->path = request_.path;
    seen->path_params = request_.path_params;
    seen->query = request_.query;
    seen->remote = request_.remote;
    seen->identity = request_.identity;
    return [state = state_, seen, done = std::move(done)](Response r) {
      state->options.on_write(*seen, r);
      done(std::move(r));
    };
  }

  // The responder answers 500 if every copy is dropped unanswered, so a
  // handler bug never leaves a client hanging.
  Responder MakeResponder(bool keep_alive) {
    struct Pending {
      std::shared_ptr<HttpSession> session;
      bool keep_alive;
      std::atomic<bool> done{false};
      ~Pending() {
        if (!done.exchange(true)) {
          session->PostReply(ErrorResponse(500, StatusCode::kInternal, "the handler gave no answer"),
                             keep_alive);
        }
      }
    };
    auto pending = std::make_shared<Pending>();
    pending->session = this->shared_from_this();
    pending->keep_alive = keep_alive;
    return [pending](Response response) {
      if (pending->done.exchange(true)) return;
      pending->session->PostReply(std::move(response), pending->keep_alive);
    };
  }

  void WriteResponse(Response r, bool keep_alive) {
    if (!r.file_path.empty()) return WriteFile(std::move(r), keep_alive);
    auto res = std::make_shared<http::response<http::string_body>>();
    res->body() = std::move(r.body);
    SetHeader(*res, r, keep_alive);
    Lowest().expires_after(Timeout());
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](error_code ec, size_t) {
      if (ec) return self->Drop("write failed: " + ec.message());
      self->state_->body_bytes_sent.fetch_add(res->body().size(), std::memory_order_relaxed);
      self->AfterWrite(res->keep_alive());
    });
  }

  template <class Body>
  static void SetHeader(http::response<Body>& res, const Response& r, bool keep_alive) {
    res.result(static_cast<unsigned>(r.status));
    res.version(11);
    res.set(http::field::server, "drover");
    res.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res.set(name, value);
    res.keep_alive(keep_alive);
    res.prepare_payload();
  }

  void AfterWrite(bool keep_alive) {
    if (!keep_alive) return Shutdown();
    ReadHeader();
  }

  // Response::file_path: the header (Content-Length: the file's size), then
  // the file in pieces read from disk (FileSend), each written whole. A file
  // that cannot be opened, or is not a regular file, is answered 404 in its
  // place.
  void WriteFile(Response r, bool keep_alive) {
    auto file = std::make_shared<FileSend>();
    if (std::string why = file->Open(r.file_path); !why.empty()) {
      spdlog::info("http {}: cannot send file {}: {}", remote_, r.file_path, why);
      return WriteResponse(
          ErrorResponse(404, StatusCode::kNotFound, "the file to send is not available"),
          keep_alive);
    }
    auto head = std::make_shared<http::response<http::empty_body>>();
    head->result(static_cast<unsigned>(r.status));
    head->version(11);
    head->set(http::field::server, "drover");
    head->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) head->set(name, value);
    head->keep_alive(keep_alive);
    head->content_length(file->size());
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*head);
    Lowest().expires_after(Timeout());
    http::async_write_header(stream_, *serializer,
                             [self = this->shared_from_this(), head, serializer, file, keep_alive](
                                 error_code ec, size_t) {
                               if (ec) return self->Drop("write of a file failed: " + ec.message());
                               self->WriteFileStep(file, keep_alive);
                             });
  }

  // One piece at a time, each under its own deadline: the limit is on
  // progress (Timeout() without the piece accepted drops the connection),
  // so a slow but moving peer is not cut and a stalled one does not hold
  // the connection and the file forever.
  void WriteFileStep(std::shared_ptr<FileSend> file, bool keep_alive) {
    if (file->done()) {
      state_->body_bytes_sent.fetch_add(file->size(), std::memory_order_relaxed);
      return AfterWrite(keep_alive);
    }
    std::string_view piece;
    std::string why;
    if (!file->ReadNext(&piece, &why)) {
      return Drop("reading the file to send failed: " + why);
    }
    Lowest().expires_after(Timeout());
    asio::async_write(
        stream_, asio::buffer(piece.data(), piece.size()),
        [self = this->shared_from_this(), file, keep_alive](error_code ec, size_t written) {
          if (ec) return self->Drop("write of a file failed: " + ec.message());
          file->Sent(written);
          self->WriteFileStep(file, keep_alive);
        });
  }

  // Answers with an error, then closes the connection: after a bad or
  // unauthenticated request the rest of the stream cannot be trusted.
  void Reject(Response r, const std::string& why) {
    state_->LogPeer(authenticated_, spdlog::level::warn,
                    "http " + remote_ + ": " + why + "; closing the connection");
    WriteResponse(std::move(r), /*keep_alive=*/false);
  }

  void Drop(const std::string& why) {
    state_->LogPeer(authenticated_, spdlog::level::info,
                    "http " + remote_ + ": " + why + "; connection dropped");
    error_code ignored;
    Lowest().socket().close(ignored);
  }

  void Shutdown() {
    if constexpr (kTls) {
      Lowest().expires_after(Seconds(2));
      stream_.async_shutdown([self = this->shared_from_this()](error_code) {
        error_code ignored;
        self->Lowest().socket().close(ignored);
      });
    } else {
      error_code ignored;
      Lowest().socket().shutdown(asio::socket_base::shutdown_send, ignored);
      Lowest().socket().close(ignored);
    }
  }

  void Upgrade(WsOpenHandler on_open) {
    const ServerLimits& limits = state_->options.limits;
    Lowest().expires_never();
    upgraded_ = true;
    using Ws = websocket::stream<Stream>;
    auto session = std::make_shared<WsSessionImpl<Stream>>(
        Ws(std::move(stream_)), remote_, limits.max_ws_message_bytes, limits.max_ws_queue_bytes);
    Ws& ws = session->ws();
    websocket::stream_base::timeout timeouts;
    timeouts.handshake_timeout = limits.handshake_timeout;
    timeouts.idle_timeout = limits.idle_timeout;
    timeouts.keep_alive_pings = true;
    ws.set_option(timeouts);
    ws.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "drover"); }));
    std::weak_ptr<ServerState> weak_state = state_;
    uint64_t id = session->id();
    state_->connections[id] = session;
    if (request_.identity) state_->connection_users[id] = request_.identity->name;
    session->SetFinishHook([weak_state, id] {
      if (auto st = weak_state.lock()) {
        st->connections.erase(id);
        st->connection_users.erase(id);
      }
    });
    ws.async_accept(parser_->release(), [session, on_open = std::move(on_open), request = std::move(request_),
                                         weak_state, id](error_code ec) mutable {
      if (ec) {
        spdlog::warn("websocket {}: handshake failed: {}", session->remote(), ec.message());
        if (auto st = weak_state.lock()) {
          st->connections.erase(id);
          st->connection_users.erase(id);
        }
        session->Abort();
        return;
      }
      on_open(session, request);
      session->Start();
    });
  }

  std::shared_ptr<ServerState> state_;
  size_t listener_;  // ServerState::kTcp or kLocal
  Stream stream_;
  std::string remote_;
  uint64_t id_ = NextConnectionId();
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  // An upload in progress (StartUpload).
  std::unique_ptr<UploadSink> upload_;
  std::optional<http::request_parser<http::buffer_body>> upload_parser_;
  bool authenticated_ = false;  // a request on it carried the token
  bool upgraded_ = false;
};

}  // namespace

void StartHttpSession(const std::shared_ptr<Server::State>& state, asio::ip::tcp::socket socket,
                      std::string remote) {
  if (state->tls) {
    auto s = std::make_shared<HttpSession<TlsStream>>(
        state, ServerState::kTcp, TlsStream(TcpStream(std::move(socket)), *state->tls), remote);
    s->Start();
  } else {
    auto s = std::make_shared<HttpSession<TcpStream>>(state, ServerState::kTcp,
                                                      TcpStream(std::move(socket)), remote);
    s->Start();
  }
}

// The local socket: plain HTTP (no TLS), the same sessions and routes, the
// token checked as on the TCP port.
void StartHttpSession(const std::shared_ptr<Server::State>& state,
                      asio::local::stream_protocol::socket socket) {
  auto s = std::make_shared<HttpSession<LocalStream>>(state, ServerState::kLocal,
                                                      LocalStream(std::move(socket)), "local");
  s->Start();
}

}  // namespace drover::net::internal
