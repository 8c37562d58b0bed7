// Each step is an asynchronous Beast call followed by io.run() on a private
// io_context: the code reads sequentially, yet the tcp_stream deadline
// bounds every step, which the synchronous Beast calls would not.

#include "net/http_client.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "net/client_tls.h"
#include "net/http_client_beast.h"
#include "net/literal_endpoint.h"
#include "net/tls_identity.h"

namespace drover::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
using beast::error_code;
using LocalStream = beast::basic_stream<local>;

// Runs the io_context until the operation just started has completed.
void RunToCompletion(asio::io_context& io) {
  io.restart();
  io.run();
}

Status NetError(error_code ec, const std::string& what, const ClientOptions& o) {
  const std::string where =
      o.local_socket.empty() ? o.host + ":" + std::to_string(o.port) : o.local_socket;
  if (ec == beast::error::timeout) {
    return Status(StatusCode::kDeadlineExceeded,
                  what + " " + where + ": no answer within " +
                      std::to_string(o.timeout.count() / 1000) + " ms");
  }
  return Unavailable(what + " " + where + ": " + ec.message());
}

// Connects the stream's lowest layer: to the local socket for a LocalStream,
// else to `endpoints`.
template <class Stream>
Status Connect(asio::io_context& io, Stream& stream, const tcp::resolver::results_type& endpoints,
               const ClientOptions& o) {
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(o.timeout);
  error_code ec;
  if constexpr (std::is_same_v<Stream, LocalStream>) {
    lowest.async_connect(local::endpoint(o.local_socket), [&](error_code e) { ec = e; });
    RunToCompletion(io);
    if (ec) return NetError(ec, "cannot connect to", o);
  } else {
    lowest.async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    RunToCompletion(io);
    if (ec) return NetError(ec, "cannot connect to", o);
    // A request is written in pieces (TLS records, header then body): without
    // this, Nagle holds a piece back for the peer's delayed ACK (~40 ms).
    error_code nodelay_ec;
    lowest.socket().set_option(tcp::no_delay(true), nodelay_ec);
  }
  return Status::Ok();
}

template <class Stream>
constexpr bool kIsTls =
    !std::is_same_v<Stream, beast::tcp_stream> && !std::is_same_v<Stream, LocalStream>;

// The key of the TLS session kept for a server.
std::string SessionKey(const ClientOptions& o, const std::string& fingerprint) {
  return o.host + ":" + std::to_string(o.port) + "/" + fingerprint;
}

// Connects, makes the TLS handshake and checks the pinned fingerprint (TLS
// streams), then writes `request`. The deadline set by Connect covers all
// of it.
template <class Stream>
Status Open(asio::io_context& io, Stream& stream, const tcp::resolver::results_type& endpoints,
            const ClientOptions& o, const std::string& fingerprint) {
  RETURN_IF_ERROR(Connect(io, stream, endpoints, o));
  if constexpr (kIsTls<Stream>) {
    error_code ec;
    OfferClientSession(stream.native_handle(), SessionKey(o, fingerprint));
    stream.async_handshake(ssl::stream_base::client, [&](error_code e) { ec = e; });
    RunToCompletion(io);
    if (ec) return NetError(ec, "TLS handshake failed with", o);
    // Pin before anything (the token above all) is sent.
    RETURN_IF_ERROR(CheckPeerFingerprint(stream.native_handle(), fingerprint));
  }
  return Status::Ok();
}

template <class Stream>
Status OpenAndSend(asio::io_context& io, Stream& stream,
                   const tcp::resolver::results_type& endpoints, const ClientOptions& o,
                   const std::string& fingerprint, const ClientRequest& request) {
  RETURN_IF_ERROR(Open(io, stream, endpoints, o, fingerprint));
  error_code ec;
  internal::BeastRequest req = internal::MakeBeastRequest(request, o, /*keep_alive=*/false);
  http::async_write(stream, req, [&](error_code e, size_t) { ec = e; });
  RunToCompletion(io);
  if (ec) return NetError(ec, "sending the request failed to", o);
  return Status::Ok();
}

// Closes the connection. After an answer read in full (`complete`) the TLS
// session is kept for the next connection to resume.
template <class Stream>
void CloseConnection(Stream& stream, const ClientOptions& o, const std::string& fingerprint,
                     bool complete) {
  if constexpr (kIsTls<Stream>) {
    if (complete) KeepClientSession(stream.native_handle(), SessionKey(o, fingerprint));
    // The connection ends without a close_notify; OpenSSL would take that
    // for a broken session and make the kept one unresumable.
    SSL_set_shutdown(stream.native_handle(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  }
  auto& lowest = beast::get_lowest_layer(stream);
  error_code ignored;
  lowest.socket().shutdown(asio::socket_base::shutdown_both, ignored);
  lowest.socket().close(ignored);
}

template <class Stream>
Result<Response> Exchange(asio::io_context& io, Stream& stream,
                          const tcp::resolver::results_type& endpoints, const ClientOptions& o,
                          const std::string& fingerprint, const ClientRequest& request) {
  RETURN_IF_ERROR(OpenAndSend(io, stream, endpoints, o, fingerprint, request));
  error_code ec;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(o.max_response_bytes);
  if (request.method == "HEAD") parser.skip(true);  // a Content-Length, but no body
  http::async_read(stream, buffer, parser, [&](error_code e, size_t) { ec = e; });
  RunToCompletion(io);
  if (ec == http::error::body_limit) {
    return ResourceExhausted("response from " + o.host + " larger than " +
                             std::to_string(o.max_response_bytes) + " bytes");
  }
  if (ec) return NetError(ec, "reading the response failed from", o);
  Response out = internal::FromBeastResponse(parser.release());
  CloseConnection(stream, o, fingerprint, /*complete=*/true);
  return out;
}

// Download: chunks handed to the sink, and the most of an error answer's
// body kept.
constexpr size_t kDownloadChunkBytes = 256 * 1024;
constexpr size_t kMaxErrorBodyBytes = 64 * 1024;

template <class Stream>
Result<Response> DownloadExchange(asio::io_context& io, Stream& stream,
                                  const tcp::resolver::results_type& endpoints,
                                  const ClientOptions& o, const std::string& fingerprint,
                                  const ClientRequest& request,
                                  const std::function<Status(std::string_view)>& sink) {
  auto& lowest = beast::get_lowest_layer(stream);
  RETURN_IF_ERROR(OpenAndSend(io, stream, endpoints, o, fingerprint, request));
  error_code ec;
  beast::flat_buffer buffer;
  // Beast reads at most the buffer's free capacity (at least 512 bytes):
  // room for whole TLS records, not 4 KiB at a time.
  buffer.reserve(kDownloadChunkBytes);
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // the body goes to the sink, not to memory
  lowest.expires_after(o.timeout);
  http::async_read_header(stream, buffer, parser, [&](error_code e, size_t) { ec = e; });
  RunToCompletion(io);
  if (ec) return NetError(ec, "reading the response failed from", o);

  Response out;
  {
    const auto& header = parser.get();
    out.status = static_cast<int>(header.result_int());
    out.content_type = std::string(header[http::field::content_type]);
    for (const auto& field : header) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
  }
  const bool success = out.status >= 200 && out.status < 300;
  std::vector<char> chunk(kDownloadChunkBytes);
  // One run of the io_context for the whole body: each read's handler
  // starts the next (a restart and run per read cost more than the read,
  // an eighth of curl's throughput for a large file).
  Status stop = Status::Ok();
  std::function<void()> read_next;
  auto on_read = [&](error_code e, size_t) {
    if (e == http::error::need_buffer) e = {};  // the chunk is full
    const size_t got = chunk.size() - parser.get().body().size;
    if (got > 0 && success) {
      if (Status s = sink(std::string_view(chunk.data(), got)); !s.ok()) {
        stop = std::move(s);
        return;
      }
    } else if (got > 0) {
      out.body.append(chunk.data(), std::min(got, kMaxErrorBodyBytes - out.body.size()));
    }
    if (e) {
      ec = e;
      return;
    }
    if (!success && out.body.size() >= kMaxErrorBodyBytes) return;  // enough to explain it
    if (!parser.is_done()) read_next();
  };
  read_next = [&] {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    // Each read has its own deadline: the timeout is on progress, so a large
    // file over a slow link is not cut while bytes keep coming.
    lowest.expires_after(o.timeout);
    http::async_read_some(stream, buffer, parser, on_read);
  };
  if (!parser.is_done()) {
    read_next();
    RunToCompletion(io);
  }
  if (!stop.ok()) {
    CloseConnection(stream, o, fingerprint, /*complete=*/false);
    return stop;
  }
  if (ec) return NetError(ec, "reading the response body failed from", o);
  CloseConnection(stream, o, fingerprint, /*complete=*/parser.is_done());
  return out;
}

// Upload: the header with the file's size, then the file in 1 MiB pieces
// (each under its own deadline), then the answer as Exchange reads it.
constexpr size_t kUploadPieceBytes = 1 << 20;

template <class Stream>
Result<Response> UploadExchange(asio::io_context& io, Stream& stream,
                                const tcp::resolver::results_type& endpoints,
                                const ClientOptions& o, const std::string& fingerprint,
                                const ClientRequest& request, int fd, uint64_t size) {
  auto& lowest = beast::get_lowest_layer(stream);
  RETURN_IF_ERROR(Open(io, stream, endpoints, o, fingerprint));
  error_code ec;
  http::request<http::empty_body> head;
  head.method_string(request.method);
  head.target(request.target);
  head.version(11);
  head.set(http::field::host, o.host);
  head.set(http::field::user_agent, "drover");
  if (!o.token.empty()) head.set(http::field::authorization, "Bearer " + o.token);
  head.set(http::field::content_type, request.content_type);
  for (const auto& [name, value] : request.headers) head.set(name, value);
  head.keep_alive(false);
  head.content_length(size);
  http::request_serializer<http::empty_body> serializer(head);
  http::async_write_header(stream, serializer, [&](error_code e, size_t) { ec = e; });
  RunToCompletion(io);
  if (ec) return NetError(ec, "sending the request failed to", o);
  std::vector<char> piece(static_cast<size_t>(std::min<uint64_t>(size, kUploadPieceBytes)));
  uint64_t sent = 0;
  while (sent < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(piece.size(), size - sent));
    const ssize_t n = ::pread(fd, piece.data(), want, static_cast<off_t>(sent));
    if (n <= 0) {
      CloseConnection(stream, o, fingerprint, /*complete=*/false);
      return Unavailable("reading the file to upload failed: " +
                         std::string(n < 0 ? std::strerror(errno) : "it got shorter"));
    }
    lowest.expires_after(o.timeout);
    asio::async_write(stream, asio::buffer(piece.data(), static_cast<size_t>(n)),
                      [&](error_code e, size_t) { ec = e; });
    RunToCompletion(io);
    // The server may answer (507, 413) and close before the body is
    // through: its answer says more than the broken pipe.
    if (ec) break;
    sent += static_cast<uint64_t>(n);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(o.max_response_bytes);
  lowest.expires_after(o.timeout);
  error_code read_ec;
  http::async_read(stream, buffer, parser, [&](error_code e, size_t) { read_ec = e; });
  RunToCompletion(io);
  if (read_ec) {
    if (ec) return NetError(ec, "sending the body failed to", o);
    return NetError(read_ec, "reading the response failed from", o);
  }
  Response out = internal::FromBeastResponse(parser.release());
  CloseConnection(stream, o, fingerprint, /*complete=*/!ec);
  return out;
}

}  // namespace

namespace internal {

BeastRequest MakeBeastRequest(const ClientRequest& request, const ClientOptions& options,
                              bool keep_alive) {
  BeastRequest req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  req.set(http::field::host, options.host);
  req.set(http::field::user_agent, "drover");
  if (!options.token.empty()) req.set(http::field::authorization, "Bearer " + options.token);
  for (const auto& [name, value] : request.headers) req.set(name, value);
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    req.set(http::field::content_type, request.content_type);
    req.body() = request.body;
  }
  req.keep_alive(keep_alive);
  req.prepare_payload();
  return req;
}

Response FromBeastResponse(BeastResponse&& res) {
  Response out;
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  out.body = std::move(res.body());
  return out;
}

}  // namespace internal

namespace {

struct SessionCache {
  std::mutex mu;
  std::map<std::string, SSL_SESSION*> sessions;  // owned references
};

SessionCache& Sessions() {
  static SessionCache* cache = new SessionCache();  // never destroyed: used until exit
  return *cache;
}

}  // namespace

void OfferClientSession(ssl_st* ssl, const std::string& server) {
  SessionCache& c = Sessions();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.sessions.find(server);
  if (it != c.sessions.end()) SSL_set_session(ssl, it->second);
}

void KeepClientSession(ssl_st* ssl, const std::string& server) {
  SSL_SESSION* session = SSL_get1_session(ssl);
  if (session == nullptr) return;
  if (SSL_SESSION_is_resumable(session) == 0) {
    SSL_SESSION_free(session);
    return;
  }
  SessionCache& c = Sessions();
  std::lock_guard<std::mutex> lock(c.mu);
  SSL_SESSION*& slot = c.sessions[server];
  if (slot != nullptr) SSL_SESSION_free(slot);
  slot = session;
}

long ClientSessionsResumed() { return SSL_CTX_sess_hits(SharedClientTlsContext()->native_handle()); }

std::shared_ptr<ssl::context> SharedClientTlsContext() {
  static const std::shared_ptr<ssl::context> shared = [] {
    // A client that trusts only a pinned fingerprint has no use for the
    // system's openssl.cnf (CA paths, policies): reading and parsing it was
    // ~0.8 million instructions of every CLI command. Nor for OpenSSL's
    // exit handler, which frees every table OpenSSL built (~1.4 million
    // instructions) just before the process ends anyway. Nor for the
    // legacy tables of every cipher and digest by name, which OpenSSL 3
    // builds and then copies into its name map (~3 million instructions):
    // TLS fetches its algorithms from the provider under the provider's own
    // names, and EVP_sha256() and the like work without them. This must
    // come before OpenSSL initializes itself; in a process that has already
    // (the server of `drover up`) it changes nothing.
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ATEXIT |
                         OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                     nullptr);
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    // Trust comes from the pinned fingerprint, checked after the handshake.
    ctx->set_verify_mode(ssl::verify_none);
    // Drover's servers speak TLS 1.3: offer that alone, with one key
    // exchange group (one key share, no HelloRetryRequest) and one suite
    // (SHA-256 where the default first choice hashes with SHA-384).
    SSL_CTX* native = ctx->native_handle();
    SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
    SSL_CTX_set1_groups_list(native, "X25519");
    SSL_CTX_set_ciphersuites(native, "TLS_AES_128_GCM_SHA256");
    return ctx;
  }();
  return shared;
}

HttpClient::HttpClient(ClientOptions options) : options_(std::move(options)) {}

namespace {

// Makes the stream Send and Download need (local socket, TLS pinned to the
// fingerprint, or plain TCP) and runs `exchange(io, stream, endpoints,
// fingerprint)` on it.
template <class Fn>
Result<Response> WithStream(const ClientOptions& options, Fn&& exchange) {
  if (!options.local_socket.empty()) {
    asio::io_context io(1);
    LocalStream stream(io);
    return exchange(io, stream, tcp::resolver::results_type{}, std::string());
  }
  std::string fingerprint;
  if (options.tls) {
    if (options.fingerprint.empty()) {
      return FailedPrecondition("TLS is on but no server fingerprint is known to pin (use the "
                                "access file, --fingerprint, or --no-tls)");
    }
    ASSIGN_OR_RETURN(fingerprint, NormalizeFingerprint(options.fingerprint));
  }
  asio::io_context io(1);
  tcp::resolver::results_type endpoints;
  if (auto literal = internal::LiteralEndpoint(options.host, options.port)) {
    endpoints = std::move(*literal);
  } else {
    tcp::resolver resolver(io);
    error_code ec;
    resolver.async_resolve(options.host, std::to_string(options.port),
                           [&](error_code e, tcp::resolver::results_type r) {
                             ec = e;
                             endpoints = std::move(r);
                           });
    RunToCompletion(io);
    if (ec) return NetError(ec, "cannot resolve", options);
  }

  if (options.tls) {
    std::shared_ptr<ssl::context> ctx = SharedClientTlsContext();
    beast::ssl_stream<beast::tcp_stream> stream(io, *ctx);
    return exchange(io, stream, endpoints, fingerprint);
  }
  beast::tcp_stream stream(io);
  return exchange(io, stream, endpoints, fingerprint);
}

}  // namespace

Result<Response> HttpClient::Send(const ClientRequest& request) {
  return WithStream(
      options_, [&](asio::io_context& io, auto& stream,
                    const tcp::resolver::results_type& endpoints, const std::string& fingerprint) {
        return Exchange(io, stream, endpoints, options_, fingerprint, request);
      });
}

Result<Response> HttpClient::Download(const ClientRequest& request,
                                      const std::function<Status(std::string_view chunk)>& sink) {
  return WithStream(
      options_, [&](asio::io_context& io, auto& stream,
                    const tcp::resolver::results_type& endpoints, const std::string& fingerprint) {
        return DownloadExchange(io, stream, endpoints, options_, fingerprint, request, sink);
      });
}

Result<Response> HttpClient::Upload(const ClientRequest& request, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file");
  }
  Result<Response> answer = WithStream(
      options_, [&](asio::io_context& io, auto& stream,
                    const tcp::resolver::results_type& endpoints, const std::string& fingerprint) {
        return UploadExchange(io, stream, endpoints, options_, fingerprint, request, fd,
                              static_cast<uint64_t>(info.st_size));
      });
  ::close(fd);
  return answer;
}

Result<Response> HttpClient::Get(const std::string& target) {
  ClientRequest r;
  r.target = target;
  return Send(r);
}

Result<Response> HttpClient::Post(const std::string& target, std::string body) {
  ClientRequest r;
  r.method = "POST";
  r.target = target;
  r.body = std::move(body);
  return Send(r);
}

}  // namespace drover::net
