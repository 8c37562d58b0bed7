// The connect sequence (resolve, TCP connect, TLS handshake and pin check,
// WebSocket upgrade with the token) as one heap object that keeps itself
// alive through its completion handlers.

#include "net/ws_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <optional>

#include "net/client_tls.h"
#include "net/event_loop_asio.h"
#include "net/http_client_beast.h"
#include "net/literal_endpoint.h"
#include "net/tls_identity.h"
#include "net/ws_session_impl.h"

namespace drover::net {
namespace {

namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
namespace asio = internal::asio;
namespace beast = internal::beast;
namespace websocket = internal::websocket;
using tcp = asio::ip::tcp;
using beast::error_code;

template <class NextLayer>
class ConnectOp : public std::enable_shared_from_this<ConnectOp<NextLayer>> {
 public:
  static constexpr bool kTls = std::is_same_v<NextLayer, internal::TlsStream>;
  static constexpr bool kLocal = std::is_same_v<NextLayer, internal::LocalStream>;
  using Ws = websocket::stream<NextLayer>;

  ConnectOp(asio::io_context& io, ClientOptions options, std::string target, std::string fingerprint,
            WsConnectCallback done, std::optional<ClientRequest> first = std::nullopt,
            WsTargetFn then = nullptr)
      : options_(std::move(options)),
        target_(std::move(target)),
        fingerprint_(std::move(fingerprint)),
        done_(std::move(done)),
        first_(std::move(first)),
        then_(std::move(then)),
        resolver_(io) {
    if constexpr (kTls) {
      // Trust comes from the pinned fingerprint, checked after the handshake.
      tls_ = SharedClientTlsContext();
      ws_.emplace(io, *tls_);
    } else {
      ws_.emplace(io);
    }
  }

  void Begin() {
    if constexpr (kLocal) {
      asio::post(resolver_.get_executor(), [self = this->shared_from_this()] { self->ConnectLocal(); });
      return;
    } else {
      BeginTcp();
    }
  }

 private:
  void BeginTcp() {
    if (auto literal = internal::LiteralEndpoint(options_.host, options_.port)) {
      // Still from the loop, like every other outcome.
      asio::post(resolver_.get_executor(),
                 [self = this->shared_from_this(), endpoints = std::move(*literal)] {
                   self->Connect(endpoints);
                 });
      return;
    }
    resolver_.async_resolve(options_.host, std::to_string(options_.port),
                            [self = this->shared_from_this()](error_code ec,
                                                              tcp::resolver::results_type results) {
                              if (ec) return self->Fail(self->NetError(ec, "cannot resolve"));
                              self->Connect(results);
                            });
  }

  auto& Lowest() { return beast::get_lowest_layer(*ws_); }

  // The server's address in messages: host:port, or the local socket's path.
  std::string Where() const {
    return kLocal ? options_.local_socket : options_.host + ":" + std::to_string(options_.port);
  }

  Status NetError(error_code ec, const std::string& what) const {
    const std::string where = Where();
    if (ec == beast::error::timeout) {
      return Status(StatusCode::kDeadlineExceeded, what + " " + where + ": timed out");
    }
    return Unavailable(what + " " + where + ": " + ec.message());
  }

  void Connect(const tcp::resolver::results_type& results) {
    Lowest().expires_after(options_.timeout);
    Lowest().async_connect(results, [self = this->shared_from_this()](error_code ec,
                                                                      const tcp::endpoint& ep) {
      if (ec) return self->Fail(self->NetError(ec, "cannot connect to"));
      self->remote_ = internal::EndpointText(ep);
      // Small messages (started, finished) must not wait for an ACK (Nagle),
      // as on the server's side of the connection.
      error_code nodelay_ec;
      self->Lowest().socket().set_option(tcp::no_delay(true), nodelay_ec);
      if constexpr (kTls) {
        self->TlsHandshake();
      } else {
        self->Proceed();
      }
    });
  }

  void ConnectLocal() {
    Lowest().expires_after(options_.timeout);
    Lowest().async_connect(asio::local::stream_protocol::endpoint(options_.local_socket),
                           [self = this->shared_from_this()](error_code ec) {
                             if (ec) return self->Fail(self->NetError(ec, "cannot connect to"));
                             self->remote_ = self->options_.local_socket;
                             self->Proceed();
                           });
  }

  void TlsHandshake() {
    OfferClientSession(ws_->next_layer().native_handle(),
                       options_.host + ":" + std::to_string(options_.port) + "/" + fingerprint_);
    ws_->next_layer().async_handshake(
        ssl::stream_base::client, [self = this->shared_from_this()](error_code ec) {
          if (ec) return self->Fail(self->NetError(ec, "TLS handshake failed with"));
          Status pinned =
              CheckPeerFingerprint(self->ws_->next_layer().native_handle(), self->fingerprint_);
          if (!pinned.ok()) return self->Fail(pinned);
          self->Proceed();
        });
  }

  // After the connection is made (and pinned): the request first, if any.
  void Proceed() {
    if (first_) return SendFirst();
    Upgrade();
  }

  void SendFirst() {
    request_.emplace(internal::MakeBeastRequest(*first_, options_, /*keep_alive=*/true));
    Lowest().expires_after(options_.timeout);
    http::async_write(ws_->next_layer(), *request_,
                      [self = this->shared_from_this()](error_code ec, size_t) {
                        if (ec) return self->Fail(self->NetError(ec, "sending the request failed to"));
                        self->ReadFirst();
                      });
  }

  void ReadFirst() {
    parser_.emplace();
    parser_->body_limit(options_.max_response_bytes);
    http::async_read(ws_->next_layer(), buffer_, *parser_,
                     [self = this->shared_from_this()](error_code ec, size_t) {
                       self->OnFirstResponse(ec);
                     });
  }

  void OnFirstResponse(error_code ec) {
    if (ec == http::error::body_limit) {
      return Fail(ResourceExhausted("response from " + options_.host + " larger than " +
                                    std::to_string(options_.max_response_bytes) + " bytes"));
    }
    if (ec) return Fail(NetError(ec, "reading the response failed from"));
    const bool keep_alive = parser_->get().keep_alive();
    Response response = internal::FromBeastResponse(parser_->release());
    Result<std::string> target = then_(response);
    if (!target.ok()) return Fail(target.status());
    if (!keep_alive || buffer_.size() != 0) {
      // The server ends the connection after its answer (or sent more than
      // it was asked): the stream needs a connection of its own.
      return Fail(Unavailable("server " + Where() + " closed the connection after its answer"));
    }
    target_ = std::move(*target);
    Upgrade();
  }

  void Upgrade() {
    Lowest().expires_never();
    websocket::stream_base::timeout timeouts;
    timeouts.handshake_timeout = options_.timeout;
    timeouts.idle_timeout = options_.ws_idle_timeout > Duration::zero()
                                ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      options_.ws_idle_timeout)
                                : websocket::stream_base::none();
    timeouts.keep_alive_pings = options_.ws_idle_timeout > Duration::zero();
    ws_->set_option(timeouts);
    ws_->set_option(websocket::stream_base::decorator(
        [token = options_.token](websocket::request_type& req) {
          req.set(http::field::user_agent, "drover");
          if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
        }));
    const std::string host =
        kLocal ? std::string("localhost") : options_.host + ":" + std::to_string(options_.port);
    ws_->async_handshake(response_, host, target_, [self = this->shared_from_this()](error_code ec) {
      if (ec == websocket::error::upgrade_declined) return self->Fail(self->Declined());
      if (ec) return self->Fail(self->NetError(ec, "WebSocket handshake failed with"));
      self->Open();
    });
  }

  Status Declined() const {
    const int code = static_cast<int>(response_.result_int());
    const std::string where = Where();
    if (code == 401) {
      return Unauthenticated("server " + where +
                             " refused the token (not this cluster's, or revoked or rotated)");
    }
    if (code == 404) return NotFound("server " + where + " has no WebSocket endpoint at " + target_);
    if (code == 403) {
      // The access rules' refusal says who may not do what, and why.
      const nlohmann::json body = nlohmann::json::parse(response_.body(), nullptr, false);
      const nlohmann::json* error =
          body.is_object() && body.contains("error") ? &body["error"] : nullptr;
      if (error != nullptr && error->is_object() && error->contains("message") &&
          (*error)["message"].is_string()) {
        return PermissionDenied((*error)["message"].get<std::string>());
      }
      return PermissionDenied("server " + where + " refused the WebSocket upgrade (HTTP 403)");
    }
    return Unavailable("server " + where + " declined the WebSocket upgrade with HTTP " +
                       std::to_string(code));
  }

  void Open() {
    auto session = std::make_shared<internal::WsSessionImpl<NextLayer>>(
        std::move(*ws_), remote_, options_.max_ws_message_bytes, options_.max_ws_queue_bytes);
    ws_.reset();
    session->Hold(tls_);
    auto done = std::exchange(done_, nullptr);
    done(std::shared_ptr<WsSession>(session));
    session->Start();
  }

  void Fail(Status status) {
    error_code ignored;
    Lowest().socket().close(ignored);
    if (auto done = std::exchange(done_, nullptr)) done(std::move(status));
  }

  ClientOptions options_;
  std::string target_;
  std::string fingerprint_;
  WsConnectCallback done_;
  std::optional<ClientRequest> first_;  // sent before the upgrade, if any
  WsTargetFn then_;
  std::optional<internal::BeastRequest> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_;
  tcp::resolver resolver_;
  std::shared_ptr<ssl::context> tls_;
  std::optional<Ws> ws_;
  websocket::response_type response_;
  std::string remote_;
};

}  // namespace

namespace {

void StartConnect(EventLoop& loop, const ClientOptions& options, std::string target,
                  WsConnectCallback done, std::optional<ClientRequest> first, WsTargetFn then) {
  asio::io_context& io = IoContextOf(loop);
  if (!options.local_socket.empty()) {
    auto op = std::make_shared<ConnectOp<internal::LocalStream>>(
        io, options, std::move(target), "", std::move(done), std::move(first), std::move(then));
    op->Begin();
    return;
  }
  if (!options.tls) {
    auto op = std::make_shared<ConnectOp<internal::TcpStream>>(
        io, options, std::move(target), "", std::move(done), std::move(first), std::move(then));
    op->Begin();
    return;
  }
  Result<std::string> fingerprint =
      options.fingerprint.empty()
          ? Result<std::string>(FailedPrecondition(
                "TLS is on but no server fingerprint is known to pin (use the access file, "
                "--fingerprint, or --no-tls)"))
          : NormalizeFingerprint(options.fingerprint);
  if (!fingerprint.ok()) {
    // Report on the loop like every other outcome, never from inside this call.
    asio::post(io, [done = std::move(done), status = fingerprint.status()] { done(status); });
    return;
  }
  auto op = std::make_shared<ConnectOp<internal::TlsStream>>(io, options, std::move(target),
                                                             *fingerprint, std::move(done),
                                                             std::move(first), std::move(then));
  op->Begin();
}

}  // namespace

void ConnectWebSocket(EventLoop& loop, const ClientOptions& options, std::string target,
                      WsConnectCallback done) {
  StartConnect(loop, options, std::move(target), std::move(done), std::nullopt, nullptr);
}

void RequestThenWebSocket(EventLoop& loop, const ClientOptions& options, ClientRequest request,
                          WsTargetFn then, WsConnectCallback done) {
  StartConnect(loop, options, "", std::move(done), std::move(request), std::move(then));
}

}  // namespace drover::net
