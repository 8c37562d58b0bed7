// libFuzzer target: what the users and audit routes read from a stranger
// (server/user_requests.h) and the users file, <state_dir>/users.json
// (server/users_file.h), which whoever can write the state directory may
// have written. Each input goes to all three:
//
//   - as the body of POST /api/v1/users: an accepted one names a valid user
//     and a known role;
//   - as the query string of GET /api/v1/audit: an accepted one has a limit
//     of 1 to kMaxAuditLimit;
//   - as a users file: a refused one's error names the file; an accepted
//     one keeps UserBook's invariants (valid, unique names; each user not
//     revoked has a 64-hex-digit token hash no other has, a revoked one
//     none; an admin not revoked) and reads back equal from what
//     UsersFileText writes of it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "net/http_types.h"
#include "net/identity.h"
#include "net/sha256.h"
#include "server/user_requests.h"
#include "server/users_file.h"

namespace {

namespace server = drover::server;
namespace net = drover::net;

constexpr char kPath[] = "/state/users.json";

void CheckUserAdd(std::string_view text) {
  auto add = server::ParseUserAddRequest(text);
  if (!add.ok()) return;
  if (!server::CheckUserName(add->name).empty()) std::abort();
  if (net::ParseRole(net::RoleName(add->role)) != add->role) std::abort();
}

void CheckAuditQuery(std::string_view text) {
  auto q = server::ParseAuditQuery(net::ParseQuery(text));
  if (!q.ok()) return;
  if (q->limit == 0 || q->limit > server::kMaxAuditLimit) std::abort();
  if (q->since && drover::ToMicros(*q->since) <= 0) std::abort();
}

void CheckUsersFile(std::string_view text) {
  auto users = server::ParseUsersFile(text, kPath);
  if (!users.ok()) {
    if (!users.status().message().starts_with(std::string(kPath) + ": ")) std::abort();
    return;
  }
  std::set<std::string> hashes;
  size_t admins = 0;
  for (const auto& [name, e] : *users) {
    if (name != e.name || !server::CheckUserName(name).empty()) std::abort();
    if (e.revoked) {
      if (!e.token_sha256.empty()) std::abort();
      continue;
    }
    if (!net::IsSha256Hex(e.token_sha256) || !hashes.insert(e.token_sha256).second) std::abort();
    admins += e.role == net::Role::kAdmin;
  }
  if (admins == 0) std::abort();
  const std::string written = server::UsersFileText(*users);
  auto again = server::ParseUsersFile(written, kPath);
  if (!again.ok() || *again != *users) std::abort();
  if (server::UsersFileText(*again) != written) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckUserAdd(text);
  CheckAuditQuery(text);
  CheckUsersFile(text);
  return 0;
}
