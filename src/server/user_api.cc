#include "server/user_api.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "net/json_text.h"
#include "proto/api_json.h"
#include "server/rest_api.h"
#include "server/user_requests.h"

namespace drover::server {

using json = nlohmann::json;

namespace {

net::Response Json(const json& j, int status = 200) {
  return net::JsonResponse(net::JsonText(j), status);
}

json TokenAnswer(const std::string& name, net::Role role, const std::string& token) {
  return {{"name", name}, {"role", std::string(net::RoleName(role))}, {"token", token}};
}

}  // namespace

AuditEntry AuditEntryFor(const net::Request& r, const net::Response& answer, Time now) {
  AuditEntry e;
  e.at = now;
  if (r.identity) {
    e.user = r.identity->name;
    e.role = std::string(net::RoleName(r.identity->role));
  }
  e.from = r.remote;
  e.method = r.method;
  e.path = r.path;
  e.status = answer.status;
  json body = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return e;
  if (answer.status >= 400) {
    if (body.contains("error") && body["error"].is_object())
      e.detail = body["error"].value("message", "");
    return e;
  }
  if (body.contains("id") && body["id"].is_number_unsigned() && r.path == "/api/v1/jobs") {
    e.detail = "job " + std::to_string(body["id"].get<uint64_t>());
    if (body.contains("user") && body["user"].is_string() &&
        body["user"].get<std::string>() != e.user) {
      e.detail += " for " + body["user"].get<std::string>();
    }
  } else if (body.contains("jobs") && body["jobs"].is_array()) {
    std::string ids;
    size_t refused = 0;
    for (const json& j : body["jobs"]) {
      if (j.contains("id") && j["id"].is_number_unsigned()) {
        ids += (ids.empty() ? "" : ",") + std::to_string(j["id"].get<uint64_t>());
      } else {
        ++refused;
      }
    }
    e.detail = "jobs " + ids + (refused > 0 ? " (" + std::to_string(refused) + " refused)" : "");
  } else if (body.contains("name") && r.path.starts_with("/api/v1/users")) {
    e.detail = "user " + body.value("name", "") +
               (body.contains("role") ? " (" + body.value("role", "") + ")" : "");
  }
  return e;
}

void AddUserRoutes(net::Server& server, UserBook& users, AuditLog& audit, Clock& clock) {
  server.Route("GET", "/api/v1/whoami", [](const net::Request& r, net::Responder done) {
    if (!r.identity) return done(net::ErrorResponse(401, StatusCode::kUnauthenticated, "no token"));
    done(
        Json({{"name", r.identity->name}, {"role", std::string(net::RoleName(r.identity->role))}}));
  });
  server.Route("GET", "/api/v1/users", [&users](const net::Request&, net::Responder done) {
    json list = json::array();
    for (const UserBook::Entry& e : users.List()) {
      list.push_back({{"name", e.name},
                      {"role", std::string(net::RoleName(e.role))},
                      {"created", proto::FormatRfc3339(e.created)},
                      {"changed", proto::FormatRfc3339(e.changed)},
                      {"revoked", e.revoked}});
    }
    done(Json({{"users", std::move(list)}}));
  });
  server.Route("POST", "/api/v1/users",
               [&users, &clock](const net::Request& r, net::Responder done) {
                 Result<UserAddRequest> add = ParseUserAddRequest(r.body);
                 if (!add.ok()) return done(ApiError(add.status()));
                 Result<std::string> token = users.Add(add->name, add->role, clock.Now());
                 if (!token.ok()) return done(ApiError(token.status()));
                 spdlog::info("user {} added with role {} by {}", add->name,
                              net::RoleName(add->role), r.identity ? r.identity->name : "");
                 done(Json(TokenAnswer(add->name, add->role, *token)));
               });
  server.Route("POST", "/api/v1/users/{name}/rotate",
               [&users, &clock, &server](const net::Request& r, net::Responder done) {
                 const std::string& name = r.path_params.at("name");
                 Result<std::string> token = users.Rotate(name, clock.Now());
                 if (!token.ok()) return done(ApiError(token.status()));
                 // Connections that sent the old token end: it no longer holds.
                 const size_t closed =
                     r.identity && r.identity->name == name ? 0 : server.CloseConnectionsOf(name);
                 spdlog::info("user {}: token rotated by {}; {} connection(s) closed", name,
                              r.identity ? r.identity->name : "", closed);
                 done(Json(TokenAnswer(name, users.Find(name)->role, *token)));
               });
  server.Route("POST", "/api/v1/users/{name}/revoke",
               [&users, &clock, &server](const net::Request& r, net::Responder done) {
                 const std::string& name = r.path_params.at("name");
                 if (r.identity && r.identity->name == name) {
                   return done(ApiError(FailedPrecondition("you cannot revoke your own access (" +
                                                           name + "): ask another admin")));
                 }
                 if (Status s = users.Revoke(name, clock.Now()); !s.ok()) return done(ApiError(s));
                 const size_t closed = server.CloseConnectionsOf(name);
                 spdlog::info("user {} revoked by {}; {} open connection(s) closed", name,
                              r.identity ? r.identity->name : "", closed);
                 done(Json({{"name", name}, {"revoked", true}, {"closed", closed}}));
               });
  server.Route("GET", "/api/v1/audit", [&audit](const net::Request& r, net::Responder done) {
    Result<AuditQuery> q = ParseAuditQuery(r.query);
    if (!q.ok()) return done(ApiError(q.status()));
    Result<std::vector<AuditEntry>> entries = audit.Read(*q);
    if (!entries.ok()) return done(ApiError(entries.status()));
    json list = json::array();
    for (const AuditEntry& e : *entries) {
      list.push_back({{"seq", e.seq},
                      {"at", proto::FormatRfc3339(e.at)},
                      {"user", e.user},
                      {"role", e.role},
                      {"from", e.from},
                      {"method", e.method},
                      {"path", e.path},
                      {"status", e.status},
                      {"detail", e.detail}});
    }
    done(Json({{"entries", std::move(list)}, {"last_seq", audit.last_seq()}}));
  });
}

}  // namespace drover::server
