// What the user and audit routes (server/user_api.h) read from a request,
// parsed apart from the server so that it can be fuzzed
// (fuzz/users_fuzz.cc):
//
//   POST /api/v1/users    {"name":"ana", "role":"user"}  (role defaults to user)
//   GET  /api/v1/audit    ?user=ana&after=SEQ&limit=N&since_us=MICROS
//
// Errors are InvalidArgument naming the field, as the API answers them
// (HTTP 400).
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_SERVER_USER_REQUESTS_H_
#define DROVER_SERVER_USER_REQUESTS_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/identity.h"
#include "server/audit_log.h"

namespace drover::server {

struct UserAddRequest {
  std::string name;  // CheckUserName accepts it
  net::Role role = net::Role::kUser;
};

// The body of POST /api/v1/users: a JSON object with "name" and optionally
// "role", nothing else. Errors: not an object, an unknown field, a name or
// role that is not text, a name CheckUserName refuses, an unknown role.
Result<UserAddRequest> ParseUserAddRequest(std::string_view body);

// The most entries one GET /api/v1/audit answers with.
inline constexpr size_t kMaxAuditLimit = 100000;

// The decoded query of GET /api/v1/audit (net::Request::query). "after",
// "limit" and "since_us" are decimal numbers of 1 to 18 digits; a limit of
// 0 or past kMaxAuditLimit is kMaxAuditLimit, so an accepted query's limit
// is 1 to kMaxAuditLimit. Other parameters are ignored. Errors: a number
// that is not one, naming the parameter and quoting it (net::Printable).
Result<AuditQuery> ParseAuditQuery(const std::map<std::string, std::string>& query);

}  // namespace drover::server

#endif  // DROVER_SERVER_USER_REQUESTS_H_
