// libFuzzer target: raw bytes as one HTTP request to the server, through
// Server::AnswerInMemory: Beast's request parser with the server's limits,
// path and query decoding, the token check, the router and handlers, and
// the error bodies. Nothing may crash, and every answer must be a real
// HTTP status whose JSON body (when it has one) parses as JSON: invalid
// UTF-8 from the request must never reach a body unescaped.
//
// The routes are the real server's patterns (src/server/rest_api.cc,
// dashboard.cc, server_shell.cc) with handlers that do what the real ones
// do with request bytes before they touch the scheduler: parse ids with
// common/ids.h, read a job spec with proto::JobSpecFromJson, and echo a bad
// value in an error message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "net/event_loop.h"
#include "net/http_types.h"
#include "net/server.h"
#include "proto/api_json.h"
#include "proto/job_file.h"

namespace {

using drover::Status;
using drover::StatusCode;
namespace net = drover::net;

// Requests in the seed corpus carry "Authorization: Bearer fuzz-token".
constexpr char kToken[] = "fuzz-token";

net::Response Error(const Status& s) {
  net::Response r = net::ErrorResponse(s);
  r.body = drover::proto::EncodeErrorBody(s);
  return r;
}

void AddRoutes(net::Server& server) {
  server.Route("GET", "/api/v1/jobs", [](const net::Request& r, net::Responder done) {
    auto it = r.query.find("state");
    if (it == r.query.end() || it->second == "active" || it->second == "done") {
      return done(net::JsonResponse(R"({"jobs":[]})"));
    }
    done(Error(drover::InvalidArgument("state: want active, done or a task state, got \"" +
                                       it->second + "\"")));
  });
  server.Route("POST", "/api/v1/jobs", [](const net::Request& r, net::Responder done) {
    auto spec = drover::proto::JobSpecFromJson(r.body);
    if (!spec.ok()) return done(Error(spec.status()));
    done(net::JsonResponse(R"({"id":1})"));
  });
  server.Route("GET", "/api/v1/jobs/{id}", [](const net::Request& r, net::Responder done) {
    auto id = drover::ParseJobId(r.path_params.at("id"));
    if (!id.ok()) return done(Error(id.status()));
    done(Error(drover::NotFound("job " + r.path_params.at("id") + " not found")));
  });
  server.Route("POST", "/api/v1/jobs/{id}/cancel", [](const net::Request& r, net::Responder done) {
    auto id = drover::ParseJobId(r.path_params.at("id"));
    done(Error(id.ok() ? drover::NotFound("no such job") : id.status()));
  });
  server.Route("GET", "/api/v1/tasks/{id}", [](const net::Request& r, net::Responder done) {
    auto id = drover::ParseTaskId(r.path_params.at("id"));
    done(Error(id.ok() ? drover::NotFound("no such task") : id.status()));
  });
  server.Route("GET", "/assets/*", [](const net::Request& r, net::Responder done) {
    done(net::ErrorResponse(404, StatusCode::kNotFound, "no dashboard file at " + r.path));
  });
  server.Route("GET", "/healthz", [](const net::Request&, net::Responder done) {
    done(net::TextResponse("ok\n"));
  });
  server.AllowPublic("/assets/*");
  server.AllowPublic("/healthz");
  auto ignore = [](std::shared_ptr<net::WsSession>, const net::Request&) {};
  server.WebSocketRoute("/api/v1/worker", ignore);
  server.WebSocketRoute("/api/v1/events", ignore);
  server.WebSocketRoute("/api/v1/tasks/{id}/logs/follow", ignore);
}

net::Server& TheServer() {
  static net::EventLoop* loop = new net::EventLoop();
  static net::Server* server = [] {
    net::ServerOptions o;
    o.tls = false;
    o.token = kToken;
    o.limits.max_body_bytes = 64 * 1024;
    auto* s = new net::Server(*loop, o);
    AddRoutes(*s);
    return s;
  }();
  return *server;
}

void Check(const net::Response& r) {
  if (r.status < 100 || r.status > 599) std::abort();
  if (r.status != 101 && r.content_type == "application/json") {  // 101: no body
    auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  bool answered = false;
  TheServer().AnswerInMemory(raw, [&](std::optional<net::Response> r) {
    answered = true;
    if (r) Check(*r);
  });
  // Every handler here answers at once.
  if (!answered) std::abort();
  return 0;
}
