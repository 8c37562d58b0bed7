#include "server/users_file.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "net/sha256.h"

namespace drover::server {

using json = nlohmann::json;

namespace {

// Times are kept as microseconds since the epoch ("created_us").
Result<Time> ParseTimeField(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  // An unsigned number past int64 would wrap to a time before the epoch.
  if (it == j.end() || !it->is_number_integer() ||
      (it->is_number_unsigned() &&
       it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return InvalidArgument(where + ": \"" + key + "\" must be microseconds since the epoch");
  }
  return TimeFromMicros(it->get<int64_t>());
}

Result<UserEntry> ParseUser(const json& u, const std::string& where) {
  if (!u.is_object()) return InvalidArgument(where + ": expected an object");
  UserEntry e;
  if (!u.contains("name") || !u["name"].is_string())
    return InvalidArgument(where + ": \"name\" must be text");
  e.name = u["name"].get<std::string>();
  if (std::string why = CheckUserName(e.name); !why.empty())
    return InvalidArgument(where + ": " + why);
  std::optional<net::Role> role;
  if (u.contains("role") && u["role"].is_string())
    role = net::ParseRole(u["role"].get<std::string>());
  if (!role) return InvalidArgument(where + ": \"role\" must be admin, user, viewer or worker");
  e.role = *role;
  if (u.contains("revoked")) {
    if (!u["revoked"].is_boolean())
      return InvalidArgument(where + ": \"revoked\" must be true or false");
    e.revoked = u["revoked"].get<bool>();
  }
  if (!e.revoked) {
    if (!u.contains("token_sha256") || !u["token_sha256"].is_string() ||
        !net::IsSha256Hex(u["token_sha256"].get<std::string>())) {
      return InvalidArgument(where + ": \"token_sha256\" must be 64 lower-case hex digits");
    }
    e.token_sha256 = u["token_sha256"].get<std::string>();
  }
  ASSIGN_OR_RETURN(e.created, ParseTimeField(u, "created_us", where));
  ASSIGN_OR_RETURN(e.changed, ParseTimeField(u, "changed_us", where));
  return e;
}

}  // namespace

std::string TokenHash(std::string_view token) {
  net::Sha256 h;
  h.Update(token);
  return h.HexDigest();
}

std::string CheckUserName(std::string_view name) {
  auto bad = [&] {
    return "user name \"" + std::string(name.substr(0, 64)) +
           "\" is not valid: a lower-case letter or '_', then up to 31 of a-z, 0-9, '_', '-', '.'";
  };
  if (name.empty() || name.size() > 32) return bad();
  if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z'))) return bad();
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) {
      return bad();
    }
  }
  return "";
}

Status CheckUsersFileSize(uint64_t bytes, const std::string& path) {
  if (bytes <= kMaxUsersFileBytes) return Status::Ok();
  return InvalidArgument(path + ": " + std::to_string(bytes) +
                         " bytes, more than a users file may have (" +
                         std::to_string(kMaxUsersFileBytes) + ")");
}

Result<UserMap> ParseUsersFile(std::string_view text, const std::string& path) {
  RETURN_IF_ERROR(CheckUsersFileSize(text.size(), path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("users") ||
      !doc["users"].is_array()) {
    return InvalidArgument(path + ": not a users file (expected {\"users\": [...]})");
  }
  if (doc["users"].size() > kMaxUsers) {
    return InvalidArgument(path + ": " + std::to_string(doc["users"].size()) +
                           " users, more than the limit of " + std::to_string(kMaxUsers));
  }
  UserMap users;
  std::map<std::string, std::string, std::less<>> by_hash;  // of the users not revoked
  size_t admins = 0;
  for (size_t i = 0; i < doc["users"].size(); ++i) {
    const std::string where = path + ": users[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(UserEntry e, ParseUser(doc["users"][i], where));
    if (users.count(e.name) > 0)
      return InvalidArgument(where + ": user " + e.name + " is named twice");
    if (!e.revoked) {
      if (auto [it, fresh] = by_hash.emplace(e.token_sha256, e.name); !fresh) {
        return InvalidArgument(path + ": two users have the same token (" + it->second + " and " +
                               e.name + ")");
      }
      if (e.role == net::Role::kAdmin) ++admins;
    }
    users[e.name] = std::move(e);
  }
  if (admins == 0) return InvalidArgument(path + ": no admin that is not revoked");
  return users;
}

std::string UsersFileText(const UserMap& users) {
  json list = json::array();
  for (const auto& [name, e] : users) {
    json u = {{"name", e.name},
              {"role", std::string(net::RoleName(e.role))},
              {"created_us", ToMicros(e.created)},
              {"changed_us", ToMicros(e.changed)},
              {"revoked", e.revoked}};
    if (!e.revoked) u["token_sha256"] = e.token_sha256;
    list.push_back(std::move(u));
  }
  return json{{"users", std::move(list)}}.dump(1) + "\n";
}

}  // namespace drover::server
