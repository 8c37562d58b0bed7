#include "net/identity.h"

namespace drover::net {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kWorker:
      return "worker";
    case Role::kUser:
      return "user";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kWorker, Role::kUser, Role::kAdmin}) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

}  // namespace drover::net
