// Identity: who sent a request, as the server's authenticator found it from
// the token (server/user_book.h), and the roles Drover knows:
//
//   admin   everything
//   user    submit; cancel and read their own jobs; read others' jobs
//           unless the server hides them
//   viewer  read only
//   worker  join as a worker and use the file routes a worker needs
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_NET_IDENTITY_H_
#define DROVER_NET_IDENTITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace drover::net {

enum class Role : uint8_t { kViewer, kWorker, kUser, kAdmin };

// "admin", "user", "viewer", "worker".
std::string_view RoleName(Role role);
// The role named `name` (as RoleName spells it); nullopt for anything else.
std::optional<Role> ParseRole(std::string_view name);

struct Identity {
  std::string name;  // the user's name; empty for the bare cluster token
  Role role = Role::kAdmin;
  friend bool operator==(const Identity&, const Identity&) = default;
};

}  // namespace drover::net

#endif  // DROVER_NET_IDENTITY_H_
