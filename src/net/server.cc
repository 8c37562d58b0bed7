// The Beast side of Server. One HttpSession per TCP connection reads
// requests one at a time (header first, so authentication and routing are
// decided before a large body is read), answers through a Responder, and on
// a WebSocket upgrade hands its stream over to a WsSessionImpl.

#include "net/server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <type_traits>

#include "net/accept_pause.h"
#include "net/event_loop_asio.h"
#include "net/fd_limit.h"
#include "net/local_socket.h"
#include "net/router.h"
#include "net/sha256.h"
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

static Time WallNow() { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); }

struct WsRoute {
  WsOpenHandler on_open;
  WsToken token;
};

struct UploadRouteEntry {
  std::string dir;
  uint64_t max_bytes = 0;
  UploadHandler handler;
};

// An upload's temporary file: removed with its owner unless handed over
// (then whoever holds the handed path removes what is left, see
// Server::UploadRoute).
struct UploadFile {
  UploadFile() = default;
  UploadFile(const UploadFile&) = delete;
  UploadFile& operator=(const UploadFile&) = delete;
  int fd = -1;
  std::string path;
  bool handed = false;
  ~UploadFile() {
    if (fd >= 0) ::close(fd);
    if (!handed && !path.empty()) ::unlink(path.c_str());
  }
};

// Removes the file at `path`, if still there, when the last copy of the
// upload's responder goes.
struct LeftoverRemover {
  LeftoverRemover() = default;
  LeftoverRemover(const LeftoverRemover&) = delete;
  LeftoverRemover& operator=(const LeftoverRemover&) = delete;
  std::string path;
  ~LeftoverRemover() { ::unlink(path.c_str()); }
};

struct Server::State {
  State(EventLoop& l, ServerOptions o) : loop(l), io(IoContextOf(l)), options(std::move(o)) {}

  // The TCP port and the local socket, each with its own accept pause and
  // its own set of connections that have not sent the token yet.
  static constexpr size_t kTcp = 0;
  static constexpr size_t kLocal = 1;
  struct Listener {
    const char* name;
    AcceptPause pause;
    std::optional<asio::steady_timer> retry;
    // Oldest first: connection ids only grow.
    std::map<uint64_t, std::weak_ptr<Connection>> unauthenticated;
  };

  EventLoop& loop;
  asio::io_context& io;
  ServerOptions options;
  Router<Handler> http_routes;
  Router<WsRoute> ws_routes;
  Router<UploadRouteEntry> upload_routes;
  // The body limit while a header is read: Beast refuses a Content-Length
  // over it at the header, before the route (an upload's own limit) is
  // known. The larger of max_body_bytes and every upload route's limit.
  uint64_t header_body_limit = 0;
  std::array<Listener, 2> listeners{Listener{"the TCP port"}, Listener{"the local socket"}};
  size_t max_unauthenticated = 16;
  LogLimiter peer_log;  // lines about connections without the token
  LogLimiter push_log;  // lines about connections pushed out
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
  // The user each authenticated connection sent a token of, by connection
  // id (CloseConnectionsOf); erased with the connection.
  std::map<uint64_t, std::string> connection_users;
  // Server::body_bytes_sent / body_bytes_received; atomic because metrics
  // may read them from another thread.
  std::atomic<uint64_t> body_bytes_sent{0};
  std::atomic<uint64_t> body_bytes_received{0};

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

  // Who `token` belongs to: ServerOptions::authenticate, or the one token.
  std::shared_ptr<const Identity> IdentityOf(std::string_view token) const {
    if (options.authenticate) {
      std::optional<Identity> who = options.authenticate(token);
      if (!who) return nullptr;
      return std::make_shared<const Identity>(std::move(*who));
    }
    if (!TokenEquals(token, options.token)) return nullptr;
    static const auto kClusterToken = std::make_shared<const Identity>();
    return kClusterToken;
  }

  // The identity of the Bearer header's token, or of ?token= where
  // `query_token` (browser WebSockets); null when neither is valid.
  std::shared_ptr<const Identity> Authorized(const http::request_header<>& header,
                                             const std::map<std::string, std::string>& query,
                                             bool query_token) const {
    auto auth = header[http::field::authorization];
    std::string_view value(auth.data(), auth.size());
    constexpr std::string_view kBearer = "bearer ";
    if (value.size() > kBearer.size()) {
      bool prefix_ok = true;
      for (size_t i = 0; i < kBearer.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(value[i])) != kBearer[i]) prefix_ok = false;
      }
      if (prefix_ok) {
        if (auto who = IdentityOf(value.substr(kBearer.size()))) return who;
      }
    }
    if (query_token) {
      auto it = query.find("token");
      if (it != query.end()) return IdentityOf(it->second);
    }
    return nullptr;
  }

  // What to do with a request once its header is read: refuse it, upgrade
  // it to a WebSocket, or read its body and Dispatch it. Shared by the
  // connections and AnswerInMemory, so both decide alike.
  struct HeadDecision {
    enum class Kind { kReject, kUpgrade, kRead, kUpload };
    Kind kind = Kind::kRead;
    Response response;                       // kReject
    std::string why;                         // kReject: for the log
    const WsOpenHandler* on_open = nullptr;  // kUpgrade
    const UploadRouteEntry* upload = nullptr;  // kUpload
    bool authenticated = false;              // the request carried the token
  };

  // Fills `request` from `header` (decoding path and query) and decides.
  HeadDecision Decide(const http::request_header<>& header, const std::string& remote,
                      Request& request) const {
    request = Request();
    request.method = std::string(header.method_string());
    request.target = std::string(header.target());
    std::string_view target = header.target();
    size_t q = target.find('?');
    request.path = PercentDecode(target.substr(0, q), false);
    if (q != std::string_view::npos) request.query = ParseQuery(target.substr(q + 1));
    for (const auto& field : header) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    request.remote = remote;

    HeadDecision d;
    auto reject = [&](Response response, std::string why) {
      d.kind = HeadDecision::Kind::kReject;
      d.response = std::move(response);
      d.why = std::move(why);
      return d;
    };
    // The query is left out of messages and logs: it may hold a token.
    if (std::string bad = UncleanPart(request); !bad.empty()) {
      const std::string what = bad + " of a request to " + Printable(request.path) +
                               " is not UTF-8 text or holds control characters";
      return reject(ErrorResponse(400, StatusCode::kInvalidArgument, what), what);
    }
    if (websocket::is_upgrade(header)) {
      auto match = ws_routes.Find("GET", request.path);
      if (!match.ok()) {
        return reject(ErrorResponse(404, StatusCode::kNotFound,
                                    "no WebSocket endpoint at " + Printable(request.path)),
                      "WebSocket upgrade to unknown path " + Printable(request.path));
      }
      const bool query_token = match->target->token == WsToken::kHeaderOrQuery;
      if (!query_token && request.query.count("token") > 0) {
        return reject(ErrorResponse(401, StatusCode::kUnauthenticated,
                                    "?token= is refused on " + Printable(request.path) +
                                        ": send the token in the Authorization: Bearer header "
                                        "(tokens in URLs end up in logs)"),
                      "WebSocket upgrade to " + Printable(request.path) + " with ?token=");
      }
      request.identity = Authorized(header, request.query, query_token);
      d.authenticated = request.identity != nullptr;
      if (!d.authenticated) return reject(Unauthorized(), "WebSocket upgrade without a valid token");
      if (options.authorize) {
        if (std::optional<Response> refused = options.authorize(request)) {
          return reject(std::move(*refused), "WebSocket upgrade to " + Printable(request.path) +
                                                 " refused for " +
                                                 Printable(request.identity->name));
        }
      }
      request.path_params = std::move(match->params);
      d.kind = HeadDecision::Kind::kUpgrade;
      d.on_open = &match->target->on_open;
      return d;
    }
    request.identity = Authorized(header, request.query, false);
    d.authenticated = request.identity != nullptr;
    if (!d.authenticated && !IsPublic(request.path)) {
      return reject(Unauthorized(), "request without a valid token");
    }
    if (d.authenticated && options.authorize) {
      if (std::optional<Response> refused = options.authorize(request)) {
        return reject(std::move(*refused), request.method + " " + Printable(request.path) +
                                               " refused for " + Printable(request.identity->name));
      }
    }
    if (!upload_routes.empty()) {
      auto match = upload_routes.Find(request.method, request.path);
      if (match.ok()) {
        request.path_params = std::move(match->params);
        d.kind = HeadDecision::Kind::kUpload;
        d.upload = match->target;
      }
    }
    return d;
  }

  // "the path" or "query parameter \"x\"" when that part of the decoded
  // request is not clean text (IsCleanText); empty when all are.
  static std::string UncleanPart(const Request& request) {
    if (!IsCleanText(request.path)) return "the path";
    for (const auto& [key, value] : request.query) {
      if (!IsCleanText(key)) return "a query parameter's name";
      if (!IsCleanText(value)) return "query parameter \"" + key + "\"";
    }
    return "";
  }

  // A line about a peer: as it is for one that sent the token, at most one
  // per 10 s (with a count) for connections without it, which anyone who
  // can reach the port can open by the thousand.
  void LogPeer(bool authenticated, spdlog::level::level_enum level, const std::string& line) {
    if (authenticated) return spdlog::log(level, "{}", line);
    const uint64_t n = peer_log.Allow(WallNow());
    if (n == 0) return;
    if (n == 1) return spdlog::log(level, "{}", line);
    spdlog::log(level, "{} (and {} more lines about connections without the token held back in the last 10 s)",
                line, n - 1);
  }

  // Closes the oldest connection without the token, of listener `first` or
  // else of the other one. False when there is none.
  bool PushOutOldest(size_t first) {
    for (size_t i : {first, 1 - first}) {
      auto& waiting = listeners[i].unauthenticated;
      while (!waiting.empty()) {
        std::shared_ptr<Connection> c = waiting.begin()->second.lock();
        waiting.erase(waiting.begin());
        if (c) {
          c->Abort();
          return true;
        }
      }
    }
    return false;
  }

  // Counts a new connection on `listener` as one without the token, pushing
  // out the oldest such one at the cap.
  void Admit(size_t listener, uint64_t id, std::weak_ptr<Connection> c) {
    auto& waiting = listeners[listener].unauthenticated;
    uint64_t pushed = 0;
    while (waiting.size() >= max_unauthenticated && PushOutOldest(listener)) ++pushed;
    if (pushed > 0) {
      if (const uint64_t n = push_log.Allow(WallNow()); n > 0) {
        spdlog::warn("{} connections without the token on {} (the most kept): closed the oldest "
                     "({} such closings since the last line)",
                     max_unauthenticated, listeners[listener].name, n);
      }
    }
    waiting[id] = std::move(c);
  }

  // Routes a complete request to its handler, or answers 404 / 405.
  void Dispatch(Request& request, Responder done) const {
    auto match = http_routes.Find(request.method, request.path);
    if (!match.ok()) {
      int code = match.status().code() == StatusCode::kNotFound ? 404 : 405;
      return done(ErrorResponse(code, match.status().code(), match.status().message()));
    }
    request.path_params = std::move(match->params);
    (*match->target)(request, std::move(done));
  }

  static Response Unauthorized() {
    return ErrorResponse(401, StatusCode::kUnauthenticated,
                         "missing, wrong or revoked token (send Authorization: Bearer <token>)");
  }

  // The answer to a failed read of a request, and why (for the log); nullopt
  // when the connection is just dropped (the peer went away or timed out).
  std::optional<std::pair<Response, std::string>> AnswerReadError(error_code ec) const {
    if (ec == http::error::header_limit) {
      return std::pair(ErrorResponse(431, StatusCode::kResourceExhausted,
                                     "request header larger than " +
                                         std::to_string(options.limits.max_header_bytes) + " bytes"),
                       std::string("header too large"));
    }
    if (ec == http::error::body_limit) {
      return std::pair(ErrorResponse(413, StatusCode::kResourceExhausted,
                                     "request body larger than " +
                                         std::to_string(options.limits.max_body_bytes) + " bytes"),
                       std::string("body too large"));
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message &&
        ec != http::error::need_more) {
      return std::pair(ErrorResponse(400, StatusCode::kInvalidArgument, "malformed HTTP request"),
                       "malformed request: " + ec.message());
    }
    return std::nullopt;
  }
};

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

    using Kind = ServerState::HeadDecision::Kind;
    ServerState::HeadDecision d = state_->Decide(parser_->get(), remote_, request_);
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

  // UploadRoute: the body goes to a temporary file in the route's
  // directory, 1 MiB at a time, hashed on the way; the handler gets the
  // file once the body is complete.
  void StartUpload(const UploadRouteEntry& route) {
    const auto length = parser_->content_length();
    if (!length) {
      return Reject(ErrorResponse(411, StatusCode::kInvalidArgument,
                                  "an upload needs a Content-Length (no chunked body)"),
                    "upload without Content-Length");
    }
    if (*length > route.max_bytes) {
      return Reject(ErrorResponse(413, StatusCode::kResourceExhausted,
                                  "upload of " + std::to_string(*length) + " bytes, more than " +
                                      std::to_string(route.max_bytes)),
                    "upload too large");
    }
    Result<std::string> name = GenerateToken();
    if (!name.ok()) {
      return Reject(ErrorResponse(500, StatusCode::kInternal, name.status().message()),
                    "upload: " + name.status().message());
    }
    upload_route_ = route;
    upload_ = std::make_unique<UploadFile>();
    upload_->path = route.dir + "/.upload-" + name->substr(0, 24);
    upload_->fd = ::open(upload_->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (upload_->fd < 0) return UploadWriteFailed(errno);
    upload_sha_.emplace();
    upload_size_ = 0;
    upload_parser_.emplace(std::move(*parser_));
    upload_parser_->body_limit(route.max_bytes);
    upload_buffer_.resize(static_cast<size_t>(std::min<uint64_t>(*length, 1 << 20)) + 1);
    ReadUploadStep();
  }

  void ReadUploadStep() {
    if (upload_parser_->is_done()) return FinishUpload();
    upload_parser_->get().body().data = upload_buffer_.data();
    upload_parser_->get().body().size = upload_buffer_.size();
    // Each piece has its own deadline: a slow but moving peer is not cut.
    Lowest().expires_after(Timeout());
    http::async_read_some(
        stream_, buffer_, *upload_parser_,
        [self = this->shared_from_this()](error_code ec, size_t) { self->OnUploadRead(ec); });
  }

  void OnUploadRead(error_code ec) {
    if (ec == http::error::need_buffer) ec = {};  // the buffer is full
    const size_t got = upload_buffer_.size() - upload_parser_->get().body().size;
    if (got > 0) {
      std::string_view piece(upload_buffer_.data(), got);
      upload_sha_->Update(piece);
      upload_size_ += got;
      while (!piece.empty()) {
        const ssize_t n = ::write(upload_->fd, piece.data(), piece.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return UploadWriteFailed(errno);
        piece.remove_prefix(static_cast<size_t>(n));
      }
    }
    if (ec) {
      upload_.reset();  // the partial file goes
      if (ec == beast::error::timeout) return Drop("timed out reading an upload");
      return OnReadError(ec);
    }
    ReadUploadStep();
  }

  // The disk refused a write: answered, the partial file removed, and the
  // connection closed (the rest of the body is not read).
  void UploadWriteFailed(int error) {
    const std::string what = upload_ ? upload_->path : upload_route_.dir;
    upload_.reset();
    if (error == ENOSPC || error == EDQUOT) {
      return Reject(ErrorResponse(507, StatusCode::kResourceExhausted,
                                  "the server cannot store the upload: no space left on device"),
                    "upload to " + what + ": no space left on device");
    }
    Reject(ErrorResponse(500, StatusCode::kInternal, "the server cannot store the upload"),
           "upload to " + what + ": " + std::strerror(error));
  }

  void FinishUpload() {
    if (::close(upload_->fd) != 0) {
      upload_->fd = -1;
      return UploadWriteFailed(errno);
    }
    upload_->fd = -1;
    upload_->handed = true;
    Upload upload{upload_->path, upload_size_, upload_sha_->HexDigest()};
    upload_.reset();
    upload_sha_.reset();
    const bool keep_alive = upload_parser_->get().keep_alive();
    upload_parser_.reset();
    std::vector<char>().swap(upload_buffer_);
    state_->body_bytes_received.fetch_add(upload.size, std::memory_order_relaxed);
    Lowest().expires_never();  // the handler may take its time
    auto remover = std::make_shared<LeftoverRemover>();
    remover->path = upload.path;
    Responder inner = Audited(MakeResponder(keep_alive));
    Responder done = [inner, remover](Response r) {
      ::unlink(remover->path.c_str());
      inner(std::move(r));
    };
    UploadHandler handler = upload_route_.handler;
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
  // the file in 1 MiB pieces read from disk, each written whole. (Beast's
  // file_body writes 4 KiB at a time: a TLS record and an async step per
  // 4 KiB, an eighth of curl's throughput.) A file that cannot be opened,
  // or is not a regular file, is answered 404 in its place.
  struct FileSend {
    int fd = -1;
    uint64_t size = 0;
    uint64_t sent = 0;
    std::vector<char> buffer;
    ~FileSend() {
      if (fd >= 0) ::close(fd);
    }
  };

  void WriteFile(Response r, bool keep_alive) {
    auto file = std::make_shared<FileSend>();
    file->fd = ::open(r.file_path.c_str(), O_RDONLY | O_CLOEXEC);
    std::string why = file->fd < 0 ? std::strerror(errno) : "";
    struct stat info {};
    if (why.empty() && (::fstat(file->fd, &info) != 0 || !S_ISREG(info.st_mode))) {
      why = "not a regular file";
    }
    if (!why.empty()) {
      spdlog::info("http {}: cannot send file {}: {}", remote_, r.file_path, why);
      return WriteResponse(
          ErrorResponse(404, StatusCode::kNotFound, "the file to send is not available"),
          keep_alive);
    }
    file->size = static_cast<uint64_t>(info.st_size);
    file->buffer.resize(static_cast<size_t>(std::min<uint64_t>(file->size, 1 << 20)) + 1);
    auto head = std::make_shared<http::response<http::empty_body>>();
    head->result(static_cast<unsigned>(r.status));
    head->version(11);
    head->set(http::field::server, "drover");
    head->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) head->set(name, value);
    head->keep_alive(keep_alive);
    head->content_length(file->size);
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
    if (file->sent == file->size) {
      state_->body_bytes_sent.fetch_add(file->size, std::memory_order_relaxed);
      return AfterWrite(keep_alive);
    }
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(file->buffer.size() - 1, file->size - file->sent));
    const ssize_t n = ::pread(file->fd, file->buffer.data(), want, static_cast<off_t>(file->sent));
    if (n <= 0) {
      // Shrunk or unreadable since the header promised its size: the peer
      // must not take what it got for the whole file.
      return Drop("reading the file to send failed: " +
                  std::string(n < 0 ? std::strerror(errno) : "it got shorter"));
    }
    Lowest().expires_after(Timeout());
    asio::async_write(
        stream_, asio::buffer(file->buffer.data(), static_cast<size_t>(n)),
        [self = this->shared_from_this(), file, keep_alive](error_code ec, size_t written) {
          if (ec) return self->Drop("write of a file failed: " + ec.message());
          file->sent += written;
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
  uint64_t id_ = internal::NextConnectionId();
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  // An upload in progress (StartUpload).
  UploadRouteEntry upload_route_;
  std::unique_ptr<UploadFile> upload_;
  std::optional<http::request_parser<http::buffer_body>> upload_parser_;
  std::optional<Sha256> upload_sha_;
  uint64_t upload_size_ = 0;
  std::vector<char> upload_buffer_;
  bool authenticated_ = false;  // a request on it carried the token
  bool upgraded_ = false;
};

// After a failed accept on `listener`: out of descriptors or memory, the
// oldest connection without the token is closed to make room and accepting
// resumes after a pause (AcceptPause) instead of at once, which spun; other
// failures concern one connection and accepting goes on. Either way at most
// one log line per 10 s.
void AfterAcceptError(const std::shared_ptr<ServerState>& state, size_t listener, error_code ec,
                      void (*again)(const std::shared_ptr<ServerState>&)) {
  ServerState::Listener& l = state->listeners[listener];
  const int error = ec.category() == boost::system::system_category() ? ec.value() : 0;
  const AcceptPause::Step step = l.pause.OnFailure(error, WallNow());
  const bool made_room = AcceptPause::OutOfResources(error) && state->PushOutOldest(listener);
  if (step.log) {
    std::string then;
    if (step.pause > Duration(0)) {
      then = "; accepting again in " + std::to_string(step.pause.count() / 1000) + " ms";
      if (made_room) then += ", closed the oldest connection without the token to make room";
    }
    spdlog::warn("accept on {} failed: {} ({} failures since the last such line){}", l.name,
                 ec.message(), step.failures, then);
  }
  if (step.pause == Duration(0)) return again(state);
  l.retry.emplace(state->io);
  l.retry->expires_after(std::chrono::microseconds(step.pause.count()));
  l.retry->async_wait([state, again](error_code timer_ec) {
    if (timer_ec || state->stopped) return;
    again(state);
  });
}

void Accept(const std::shared_ptr<ServerState>& state) {
  state->acceptor->async_accept([state](error_code ec, tcp::socket socket) {
    if (state->stopped || ec == asio::error::operation_aborted) return;
    if (ec) return AfterAcceptError(state, ServerState::kTcp, ec, &Accept);
    state->listeners[ServerState::kTcp].pause.OnSuccess();
    error_code ep_ec;
    std::string remote = internal::EndpointText(socket.remote_endpoint(ep_ec));
    socket.set_option(tcp::no_delay(true), ep_ec);
    if (state->tls) {
      auto s = std::make_shared<HttpSession<TlsStream>>(
          state, ServerState::kTcp, TlsStream(beast::tcp_stream(std::move(socket)), *state->tls), remote);
      s->Start();
    } else {
      auto s = std::make_shared<HttpSession<beast::tcp_stream>>(
          state, ServerState::kTcp, beast::tcp_stream(std::move(socket)), remote);
      s->Start();
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
        if (ec) return AfterAcceptError(state, ServerState::kLocal, ec, &AcceptLocal);
        state->listeners[ServerState::kLocal].pause.OnSuccess();
        auto s = std::make_shared<HttpSession<LocalStream>>(state, ServerState::kLocal,
                                                            LocalStream(std::move(socket)), "local");
        s->Start();
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

void Server::WebSocketRoute(std::string pattern, WsOpenHandler on_open, WsToken token) {
  state_->ws_routes.Add("GET", std::move(pattern), WsRoute{std::move(on_open), token});
}

void Server::UploadRoute(std::string method, std::string pattern, std::string dir,
                         uint64_t max_bytes, UploadHandler handler) {
  state_->header_body_limit = std::max(state_->header_body_limit, max_bytes);
  state_->upload_routes.Add(std::move(method), std::move(pattern),
                            UploadRouteEntry{std::move(dir), max_bytes, std::move(handler)});
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
  const uint64_t limit = OpenFileLimit();
  st.max_unauthenticated = o.limits.max_unauthenticated_connections > 0
                               ? o.limits.max_unauthenticated_connections
                               : static_cast<size_t>(std::clamp<uint64_t>(limit / 4, 16, 1024));
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
  for (State::Listener& l : st.listeners) {
    if (l.retry) l.retry->cancel();
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

void Server::AnswerInMemory(std::string_view raw, std::function<void(std::optional<Response>)> done) {
  const State& st = *state_;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(st.options.limits.max_header_bytes));
  parser.body_limit(st.options.limits.max_body_bytes);
  parser.eager(false);
  error_code ec;
  // Feeds `raw` to the parser until `enough` holds or it fails. Once the
  // bytes are used up the parser hears end of stream, as from a peer that
  // closed.
  auto feed = [&](auto enough) {
    while (!enough()) {
      size_t used = raw.empty() ? 0 : parser.put(asio::buffer(raw.data(), raw.size()), ec);
      raw.remove_prefix(used);
      if (ec == http::error::need_more) ec = {};
      if (ec) return;
      if (used == 0) {
        // The peer closed: before any byte that is a plain end of stream
        // (and Beast's put_eof requires some).
        if (!parser.got_some()) {
          ec = http::error::end_of_stream;
          return;
        }
        parser.put_eof(ec);
        if (!ec && !enough()) ec = http::error::partial_message;
        return;
      }
    }
  };
  auto answer_error = [&] {
    auto answer = st.AnswerReadError(ec);
    done(answer ? std::optional<Response>(std::move(answer->first)) : std::nullopt);
  };
  feed([&] { return parser.is_header_done(); });
  if (ec) return answer_error();
  Request request;
  State::HeadDecision d = st.Decide(parser.get(), "memory", request);
  if (d.kind == State::HeadDecision::Kind::kReject) return done(std::move(d.response));
  if (d.kind == State::HeadDecision::Kind::kUpgrade) {
    Response switching;
    switching.status = 101;
    return done(std::move(switching));
  }
  if (d.kind == State::HeadDecision::Kind::kUpload) {
    return done(ErrorResponse(501, StatusCode::kFailedPrecondition,
                              "uploads are answered on connections only"));
  }
  parser.eager(true);
  feed([&] { return parser.is_done(); });
  if (ec) return answer_error();
  request.body = std::move(parser.get().body());
  st.Dispatch(request, [done](Response r) { done(std::move(r)); });
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
