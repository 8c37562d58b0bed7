// The Beast side of Server. One HttpSession per TCP connection reads
// requests one at a time (header first, so authentication and routing are
// decided before a large body is read), answers through a Responder, and on
// a WebSocket upgrade hands its stream over to a WsSessionImpl.

#include "net/server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <map>
#include <optional>
#include <type_traits>

#include "net/event_loop_asio.h"
#include "net/local_socket.h"
#include "net/router.h"
#include "net/tls_identity.h"
#include "net/token.h"
#include "net/ws_session_impl.h"

namespace drover::net {

namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using internal::asio::ip::tcp;
using internal::beast::error_code;
using internal::Connection;
using internal::LocalStream;
using internal::TlsStream;
using internal::WsSessionImpl;
namespace asio = internal::asio;
namespace beast = internal::beast;
namespace websocket = internal::websocket;

struct Server::State {
  State(EventLoop& l, ServerOptions o) : loop(l), io(IoContextOf(l)), options(std::move(o)) {}

  EventLoop& loop;
  asio::io_context& io;
  ServerOptions options;
  Router<Handler> http_routes;
  Router<WsOpenHandler> ws_routes;
  std::vector<std::string> public_paths;
  std::optional<ssl::context> tls;
  std::string fingerprint;
  std::optional<tcp::acceptor> acceptor;
  // The local socket (ServeLocalSocket): the claim (path, lock) and the
  // acceptor that owns its descriptor once Start() ran.
  std::optional<LocalSocketListener> local_listener;
  std::optional<asio::local::stream_protocol::acceptor> local_acceptor;
  uint16_t port = 0;
  bool stopped = false;
  std::map<uint64_t, std::weak_ptr<Connection>> connections;

  bool IsPublic(const std::string& path) const {
    for (const std::string& p : public_paths) {
      if (p.size() >= 2 && p.ends_with("/*")) {
        if (path.starts_with(std::string_view(p).substr(0, p.size() - 1))) return true;
      } else if (p == path) {
        return true;
      }
    }
    return false;
  }

  // Bearer header, or ?token= on WebSocket upgrades (browsers cannot set
  // headers there).
  bool Authorized(const http::request_header<>& header, const std::map<std::string, std::string>& query,
                  bool websocket_upgrade) const {
    auto auth = header[http::field::authorization];
    std::string_view value(auth.data(), auth.size());
    constexpr std::string_view kBearer = "bearer ";
    if (value.size() > kBearer.size()) {
      bool prefix_ok = true;
      for (size_t i = 0; i < kBearer.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(value[i])) != kBearer[i]) prefix_ok = false;
      }
      if (prefix_ok && TokenEquals(value.substr(kBearer.size()), options.token)) return true;
    }
    if (websocket_upgrade) {
      auto it = query.find("token");
      if (it != query.end() && TokenEquals(it->second, options.token)) return true;
    }
    return false;
  }
};

namespace {

using ServerState = Server::State;

template <class Stream>
class HttpSession final : public Connection, public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  HttpSession(std::shared_ptr<ServerState> state, Stream stream, std::string remote)
      : state_(std::move(state)), stream_(std::move(stream)), remote_(std::move(remote)) {}

  ~HttpSession() override { state_->connections.erase(id_); }

  void Start() {
    state_->connections[id_] = this->weak_from_this();
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

  void ReadHeader() {
    const ServerLimits& limits = state_->options.limits;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits.max_header_bytes));
    parser_->body_limit(limits.max_body_bytes);
    Lowest().expires_after(first_request_ ? limits.handshake_timeout : limits.idle_timeout);
    first_request_ = false;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(error_code ec) {
    if (ec == http::error::end_of_stream) return Shutdown();
    if (ec == http::error::header_limit) {
      return Reject(ErrorResponse(431, StatusCode::kResourceExhausted,
                                  "request header larger than " +
                                      std::to_string(state_->options.limits.max_header_bytes) +
                                      " bytes"),
                    "header too large");
    }
    if (ec == http::error::body_limit) return RejectBodyTooLarge();  // from Content-Length
    if (ec == beast::error::timeout) return Drop("timed out waiting for a request");
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return Reject(ErrorResponse(400, StatusCode::kInvalidArgument, "malformed HTTP request"),
                    "malformed request: " + ec.message());
    }
    if (ec) return Drop("read failed: " + ec.message());

    const auto& header = parser_->get();
    request_ = Request();
    request_.method = std::string(header.method_string());
    request_.target = std::string(header.target());
    std::string_view target = header.target();
    size_t q = target.find('?');
    request_.path = PercentDecode(target.substr(0, q), false);
    if (q != std::string_view::npos) request_.query = ParseQuery(target.substr(q + 1));
    for (const auto& field : header) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request_.headers[name] = std::string(field.value());
    }
    request_.remote = remote_;

    const bool upgrade = websocket::is_upgrade(header);
    if (upgrade) {
      auto match = state_->ws_routes.Find("GET", request_.path);
      if (!match.ok()) {
        return Reject(ErrorResponse(404, StatusCode::kNotFound, "no WebSocket endpoint at " + request_.path),
                      "WebSocket upgrade to unknown path " + request_.path);
      }
      if (!state_->Authorized(header, request_.query, true)) {
        return Reject(Unauthorized(), "WebSocket upgrade without a valid token");
      }
      request_.path_params = std::move(match->params);
      return Upgrade(*match->target);
    }
    if (!state_->IsPublic(request_.path) && !state_->Authorized(header, request_.query, false)) {
      return Reject(Unauthorized(), "request without a valid token");
    }
    if (parser_->is_done()) return Dispatch();
    Lowest().expires_after(state_->options.limits.idle_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](error_code ec, size_t) {
      self->OnBody(ec);
    });
  }

  void OnBody(error_code ec) {
    if (ec == http::error::body_limit) return RejectBodyTooLarge();
    if (ec == beast::error::timeout) return Drop("timed out reading the request body");
    if (ec) return Drop("reading the body failed: " + ec.message());
    request_.body = std::move(parser_->get().body());
    Dispatch();
  }

  void RejectBodyTooLarge() {
    Reject(ErrorResponse(413, StatusCode::kResourceExhausted,
                         "request body larger than " +
                             std::to_string(state_->options.limits.max_body_bytes) + " bytes"),
           "body too large");
  }

  static Response Unauthorized() {
    return ErrorResponse(401, StatusCode::kUnauthenticated,
                         "missing or wrong cluster token (send Authorization: Bearer <token>)");
  }

  void Dispatch() {
    const bool keep_alive = parser_->get().keep_alive();
    auto match = state_->http_routes.Find(request_.method, request_.path);
    if (!match.ok()) {
      int code = match.status().code() == StatusCode::kNotFound ? 404 : 405;
      return WriteResponse(ErrorResponse(code, match.status().code(), match.status().message()),
                           keep_alive);
    }
    request_.path_params = std::move(match->params);
    Lowest().expires_never();  // the handler may take its time
    (*match->target)(request_, MakeResponder(keep_alive));
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
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(static_cast<unsigned>(r.status));
    res->version(11);
    res->set(http::field::server, "drover");
    res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->keep_alive(keep_alive);
    res->body() = std::move(r.body);
    res->prepare_payload();
    Lowest().expires_after(state_->options.limits.idle_timeout);
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](error_code ec, size_t) {
      if (ec) return self->Drop("write failed: " + ec.message());
      if (!res->keep_alive()) return self->Shutdown();
      self->ReadHeader();
    });
  }

  // Answers with an error, then closes the connection: after a bad or
  // unauthenticated request the rest of the stream cannot be trusted.
  void Reject(Response r, const std::string& why) {
    spdlog::warn("http {}: {}; closing the connection", remote_, why);
    WriteResponse(std::move(r), /*keep_alive=*/false);
  }

  void Drop(const std::string& why) {
    spdlog::info("http {}: {}; connection dropped", remote_, why);
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
    session->SetFinishHook([weak_state, id] {
      if (auto st = weak_state.lock()) st->connections.erase(id);
    });
    ws.async_accept(parser_->release(), [session, on_open = std::move(on_open), request = std::move(request_),
                                         weak_state, id](error_code ec) mutable {
      if (ec) {
        spdlog::warn("websocket {}: handshake failed: {}", session->remote(), ec.message());
        if (auto st = weak_state.lock()) st->connections.erase(id);
        session->Abort();
        return;
      }
      on_open(session, request);
      session->Start();
    });
  }

  std::shared_ptr<ServerState> state_;
  Stream stream_;
  std::string remote_;
  uint64_t id_ = internal::NextConnectionId();
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  bool first_request_ = true;
  bool upgraded_ = false;
};

void Accept(const std::shared_ptr<ServerState>& state) {
  state->acceptor->async_accept([state](error_code ec, tcp::socket socket) {
    if (state->stopped || ec == asio::error::operation_aborted) return;
    if (ec) {
      spdlog::warn("accept failed: {}", ec.message());
    } else {
      error_code ep_ec;
      std::string remote = internal::EndpointText(socket.remote_endpoint(ep_ec));
      socket.set_option(tcp::no_delay(true), ep_ec);
      if (state->tls) {
        auto s = std::make_shared<HttpSession<TlsStream>>(
            state, TlsStream(beast::tcp_stream(std::move(socket)), *state->tls), remote);
        s->Start();
      } else {
        auto s = std::make_shared<HttpSession<beast::tcp_stream>>(
            state, beast::tcp_stream(std::move(socket)), remote);
        s->Start();
      }
    }
    Accept(state);
  });
}

// The local socket: plain HTTP (no TLS), the same sessions and routes, the
// token checked as on the TCP port.
void AcceptLocal(const std::shared_ptr<ServerState>& state) {
  state->local_acceptor->async_accept(
      [state](error_code ec, asio::local::stream_protocol::socket socket) {
        if (state->stopped || ec == asio::error::operation_aborted) return;
        if (ec) {
          spdlog::warn("accept on {} failed: {}", state->local_listener->path(), ec.message());
        } else {
          auto s = std::make_shared<HttpSession<LocalStream>>(state, LocalStream(std::move(socket)),
                                                              "local");
          s->Start();
        }
        AcceptLocal(state);
      });
}

}  // namespace

Server::Server(EventLoop& loop, ServerOptions options)
    : state_(std::make_shared<State>(loop, std::move(options))) {}

Server::~Server() { Stop(); }

void Server::Route(std::string method, std::string pattern, Handler handler) {
  state_->http_routes.Add(std::move(method), std::move(pattern), std::move(handler));
}

void Server::WebSocketRoute(std::string pattern, WsOpenHandler on_open) {
  state_->ws_routes.Add("GET", std::move(pattern), std::move(on_open));
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

Status Server::Start() {
  State& st = *state_;
  const ServerOptions& o = st.options;
  if (o.token.empty()) return InvalidArgument("the server needs a cluster token");
  if (o.tls) {
    if (o.cert_dir.empty()) return InvalidArgument("TLS needs a certificate directory");
    ASSIGN_OR_RETURN(TlsIdentity id, LoadOrCreateTlsIdentity(o.cert_dir));
    st.tls.emplace(ssl::context::tls_server);
    st.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                        ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    error_code ec;
    st.tls->use_certificate_chain(asio::buffer(id.cert_pem), ec);
    if (!ec) st.tls->use_private_key(asio::buffer(id.key_pem), ssl::context::pem, ec);
    if (ec) return Internal("cannot load the TLS identity from " + o.cert_dir + ": " + ec.message());
    st.fingerprint = id.fingerprint;
  }
  error_code ec;
  auto address = asio::ip::make_address(o.bind_address, ec);
  if (ec) return InvalidArgument("bind address \"" + o.bind_address + "\" is not an IP address");
  tcp::endpoint endpoint(address, o.port);
  const std::string where = internal::EndpointText(endpoint);
  st.acceptor.emplace(st.io);
  st.acceptor->open(endpoint.protocol(), ec);
  if (!ec) st.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) st.acceptor->bind(endpoint, ec);
  if (!ec) st.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    st.acceptor.reset();
    return Unavailable("cannot listen on " + where + ": " + ec.message());
  }
  st.port = st.acceptor->local_endpoint().port();
  if (st.local_listener && st.local_listener->fd() >= 0) {
    st.local_acceptor.emplace(st.io);
    st.local_acceptor->assign(asio::local::stream_protocol(), st.local_listener->fd(), ec);
    if (ec) {
      st.local_acceptor.reset();
      st.acceptor.reset();
      return Unavailable("cannot accept on " + st.local_listener->path() + ": " + ec.message());
    }
    st.local_listener->ReleaseFd();  // the acceptor closes it now
  }
  st.stopped = false;
  spdlog::info("listening on {}:{} ({})", o.bind_address, st.port, o.tls ? "TLS" : "plain TCP");
  Accept(state_);
  if (st.local_acceptor) {
    spdlog::info("listening on {} (plain HTTP, token required)", st.local_listener->path());
    AcceptLocal(state_);
  }
  return Status::Ok();
}

void Server::Stop() {
  State& st = *state_;
  if (st.stopped) return;
  st.stopped = true;
  if (st.acceptor) {
    error_code ignored;
    st.acceptor->close(ignored);
  }
  if (st.local_acceptor) {
    error_code ignored;
    st.local_acceptor->close(ignored);
  }
  // Removes the socket file and drops the claim: a clean stop leaves no
  // socket behind.
  st.local_listener.reset();
  // Copy first: aborting may erase entries.
  auto connections = st.connections;
  for (auto& [id, weak] : connections) {
    if (auto c = weak.lock()) c->Abort();
  }
}

uint16_t Server::port() const { return state_->port; }

const std::string& Server::fingerprint() const { return state_->fingerprint; }

size_t Server::connection_count() const { return state_->connections.size(); }

}  // namespace drover::net
