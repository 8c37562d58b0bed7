// Identity and routing (server_routing.h): who sent a request (the Bearer
// header, or ?token= on WebSocket routes that take it), whether its path
// and query are clean text, where it goes, and the answers to requests that
// cannot be read; and Server::AnswerInMemory, which feeds a whole request
// through the same parser, limits and decision without a socket.
//
// Threading: the loop thread (AnswerInMemory: its caller's).

#include "net/server_routing.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "net/token.h"

namespace drover::net {

namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using boost::system::error_code;
using internal::HeadDecision;

namespace {

// The identity of the Bearer header's token, or of ?token= where
// `query_token` (browser WebSockets); null when neither is valid.
std::shared_ptr<const Identity> Authorized(const Server::State& state,
                                           const http::request_header<>& header,
                                           const std::map<std::string, std::string>& query,
                                           bool query_token) {
  auto auth = header[http::field::authorization];
  std::string_view value(auth.data(), auth.size());
  constexpr std::string_view kBearer = "bearer ";
  if (value.size() > kBearer.size()) {
    bool prefix_ok = true;
    for (size_t i = 0; i < kBearer.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(value[i])) != kBearer[i]) prefix_ok = false;
    }
    if (prefix_ok) {
      if (auto who = state.IdentityOf(value.substr(kBearer.size()))) return who;
    }
  }
  if (query_token) {
    auto it = query.find("token");
    if (it != query.end()) return state.IdentityOf(it->second);
  }
  return nullptr;
}

}  // namespace

bool Server::State::IsPublic(const std::string& path) const {
  for (const std::string& p : public_paths) {
    if (p.size() >= 2 && p.ends_with("/*")) {
      if (path.starts_with(std::string_view(p).substr(0, p.size() - 1))) return true;
    } else if (p == path) {
      return true;
    }
  }
  return false;
}

std::shared_ptr<const Identity> Server::State::IdentityOf(std::string_view token) const {
  if (options.authenticate) {
    std::optional<Identity> who = options.authenticate(token);
    if (!who) return nullptr;
    return std::make_shared<const Identity>(std::move(*who));
  }
  if (!TokenEquals(token, options.token)) return nullptr;
  static const auto kClusterToken = std::make_shared<const Identity>();
  return kClusterToken;
}

std::string Server::State::UncleanPart(const Request& request) {
  if (!IsCleanText(request.path)) return "the path";
  for (const auto& [key, value] : request.query) {
    if (!IsCleanText(key)) return "a query parameter's name";
    if (!IsCleanText(value)) return "query parameter \"" + key + "\"";
  }
  return "";
}

Response Server::State::Unauthorized() {
  return ErrorResponse(401, StatusCode::kUnauthenticated,
                       "missing, wrong or revoked token (send Authorization: Bearer <token>)");
}

HeadDecision internal::Decide(const Server::State& state, const http::request_header<>& header,
                              const std::string& remote, Request& request) {
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
  if (std::string bad = Server::State::UncleanPart(request); !bad.empty()) {
    const std::string what = bad + " of a request to " + Printable(request.path) +
                             " is not UTF-8 text or holds control characters";
    return reject(ErrorResponse(400, StatusCode::kInvalidArgument, what), what);
  }
  if (websocket::is_upgrade(header)) {
    auto match = state.ws_routes.Find("GET", request.path);
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
    request.identity = Authorized(state, header, request.query, query_token);
    d.authenticated = request.identity != nullptr;
    if (!d.authenticated) {
      return reject(Server::State::Unauthorized(), "WebSocket upgrade without a valid token");
    }
    if (state.options.authorize) {
      if (std::optional<Response> refused = state.options.authorize(request)) {
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
  request.identity = Authorized(state, header, request.query, false);
  d.authenticated = request.identity != nullptr;
  if (!d.authenticated && !state.IsPublic(request.path)) {
    return reject(Server::State::Unauthorized(), "request without a valid token");
  }
  if (d.authenticated && state.options.authorize) {
    if (std::optional<Response> refused = state.options.authorize(request)) {
      return reject(std::move(*refused), request.method + " " + Printable(request.path) +
                                             " refused for " + Printable(request.identity->name));
    }
  }
  if (!state.upload_routes.empty()) {
    auto match = state.upload_routes.Find(request.method, request.path);
    if (match.ok()) {
      request.path_params = std::move(match->params);
      d.kind = HeadDecision::Kind::kUpload;
      d.upload = match->target;
    }
  }
  return d;
}

void Server::State::Dispatch(Request& request, Responder done) const {
  auto match = http_routes.Find(request.method, request.path);
  if (!match.ok()) {
    int code = match.status().code() == StatusCode::kNotFound ? 404 : 405;
    return done(ErrorResponse(code, match.status().code(), match.status().message()));
  }
  request.path_params = std::move(match->params);
  (*match->target)(request, std::move(done));
}

std::optional<std::pair<Response, std::string>> Server::State::AnswerReadError(
    error_code ec) const {
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
      size_t used = raw.empty() ? 0 : parser.put(boost::asio::buffer(raw.data(), raw.size()), ec);
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
  HeadDecision d = internal::Decide(st, parser.get(), "memory", request);
  if (d.kind == HeadDecision::Kind::kReject) return done(std::move(d.response));
  if (d.kind == HeadDecision::Kind::kUpgrade) {
    Response switching;
    switching.status = 101;
    return done(std::move(switching));
  }
  if (d.kind == HeadDecision::Kind::kUpload) {
    return done(ErrorResponse(501, StatusCode::kFailedPrecondition,
                              "uploads are answered on connections only"));
  }
  parser.eager(true);
  feed([&] { return parser.is_done(); });
  if (ec) return answer_error();
  request.body = std::move(parser.get().body());
  st.Dispatch(request, [done](Response r) { done(std::move(r)); });
}

}  // namespace drover::net
