#include "server/user_requests.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "net/http_types.h"
#include "server/users_file.h"

namespace drover::server {

using json = nlohmann::json;

Result<UserAddRequest> ParseUserAddRequest(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("expected a JSON object {\"name\", \"role\"}");
  for (const auto& [key, value] : j.items()) {
    if (key != "name" && key != "role")
      return InvalidArgument("unknown field \"" + key + "\" (name, role)");
  }
  if (!j.contains("name") || !j["name"].is_string())
    return InvalidArgument("\"name\" must be text");
  UserAddRequest out;
  out.name = j["name"].get<std::string>();
  std::string role_text = "user";
  if (j.contains("role")) {
    if (!j["role"].is_string()) return InvalidArgument("\"role\" must be text");
    role_text = j["role"].get<std::string>();
  }
  std::optional<net::Role> role = net::ParseRole(role_text);
  if (!role)
    return InvalidArgument("role \"" + role_text + "\": expected admin, user, viewer or worker");
  out.role = *role;
  // UserBook::Add refuses the same name with the same message; checked here
  // too so that an accepted request is a valid one.
  if (std::string why = CheckUserName(out.name); !why.empty()) return InvalidArgument(why);
  return out;
}

Result<AuditQuery> ParseAuditQuery(const std::map<std::string, std::string>& query) {
  auto number = [&](const char* key, uint64_t* out) -> Status {
    auto it = query.find(key);
    if (it == query.end()) return Status::Ok();
    const std::string& v = it->second;
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument(std::string(key) + ": expected a number, got \"" + net::Printable(v) +
                             "\"");
    }
    *out = std::stoull(v);
    return Status::Ok();
  };
  AuditQuery q;
  uint64_t limit = q.limit, since_us = 0;
  RETURN_IF_ERROR(number("after", &q.after_seq));
  RETURN_IF_ERROR(number("limit", &limit));
  RETURN_IF_ERROR(number("since_us", &since_us));
  // AuditLog::Read takes a limit of 0 as none: here it is the most there is.
  q.limit =
      limit == 0 ? kMaxAuditLimit : static_cast<size_t>(std::min<uint64_t>(limit, kMaxAuditLimit));
  if (since_us > 0) q.since = TimeFromMicros(static_cast<int64_t>(since_us));
  if (auto it = query.find("user"); it != query.end()) q.user = it->second;
  return q;
}

}  // namespace drover::server
