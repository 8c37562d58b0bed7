#include "server/user_book.h"

#include <nlohmann/json.hpp>

#include "net/private_file.h"
#include "net/sha256.h"
#include "net/token.h"

namespace drover::server {

using json = nlohmann::json;

namespace {

std::string HashOf(std::string_view token) {
  net::Sha256 h;
  h.Update(token);
  return h.HexDigest();
}

// Times are kept as microseconds since the epoch ("created_us").
Result<Time> ParseTimeField(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    return InvalidArgument(where + ": \"" + key + "\" must be microseconds since the epoch");
  }
  return TimeFromMicros(it->get<int64_t>());
}

}  // namespace

std::string UserBook::CheckName(std::string_view name) {
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

Result<std::unique_ptr<UserBook>> UserBook::Open(std::string path, const std::string& first_admin,
                                                 const std::string& cluster_token, Time now) {
  std::unique_ptr<UserBook> book(new UserBook(path));
  if (!net::PathExists(path)) {
    std::string name = first_admin;
    if (!CheckName(name).empty()) name = "admin";
    Entry e;
    e.name = name;
    e.role = net::Role::kAdmin;
    e.token_sha256 = HashOf(cluster_token);
    e.created = e.changed = now;
    std::map<std::string, Entry> first;
    first[name] = std::move(e);
    RETURN_IF_ERROR(book->Commit(std::move(first)));
    return book;
  }
  ASSIGN_OR_RETURN(std::string text, net::ReadWholeFile(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("users") ||
      !doc["users"].is_array()) {
    return InvalidArgument(path + ": not a users file (expected {\"users\": [...]})");
  }
  size_t admins = 0;
  for (size_t i = 0; i < doc["users"].size(); ++i) {
    const json& u = doc["users"][i];
    const std::string where = path + ": users[" + std::to_string(i) + "]";
    if (!u.is_object()) return InvalidArgument(where + ": expected an object");
    Entry e;
    if (!u.contains("name") || !u["name"].is_string())
      return InvalidArgument(where + ": \"name\" must be text");
    e.name = u["name"].get<std::string>();
    if (std::string why = CheckName(e.name); !why.empty())
      return InvalidArgument(where + ": " + why);
    if (!u.contains("role") || !u["role"].is_string() ||
        !net::ParseRole(u["role"].get<std::string>())) {
      return InvalidArgument(where + ": \"role\" must be admin, user, viewer or worker");
    }
    e.role = *net::ParseRole(u["role"].get<std::string>());
    e.revoked = u.value("revoked", false);
    if (!e.revoked) {
      if (!u.contains("token_sha256") || !u["token_sha256"].is_string() ||
          !net::IsSha256Hex(u["token_sha256"].get<std::string>())) {
        return InvalidArgument(where + ": \"token_sha256\" must be 64 lower-case hex digits");
      }
      e.token_sha256 = u["token_sha256"].get<std::string>();
      if (e.role == net::Role::kAdmin) ++admins;
    }
    ASSIGN_OR_RETURN(e.created, ParseTimeField(u, "created_us", where));
    ASSIGN_OR_RETURN(e.changed, ParseTimeField(u, "changed_us", where));
    if (book->users_.count(e.name) > 0)
      return InvalidArgument(where + ": user " + e.name + " is named twice");
    book->users_[e.name] = std::move(e);
  }
  if (admins == 0) return InvalidArgument(path + ": no admin that is not revoked");
  book->Reindex();
  // Each active user is one entry of the index unless two share a hash.
  size_t active = 0;
  for (const auto& [name, e] : book->users_) active += !e.revoked;
  if (book->by_hash_.size() != active)
    return InvalidArgument(path + ": two users have the same token");
  return book;
}

void UserBook::Reindex() {
  by_hash_.clear();
  for (const auto& [name, e] : users_) {
    if (!e.revoked) by_hash_[e.token_sha256] = name;
  }
}

Status UserBook::Commit(std::map<std::string, Entry> next) {
  json list = json::array();
  for (const auto& [name, e] : next) {
    json u = {{"name", e.name},
              {"role", std::string(net::RoleName(e.role))},
              {"created_us", ToMicros(e.created)},
              {"changed_us", ToMicros(e.changed)},
              {"revoked", e.revoked}};
    if (!e.revoked) u["token_sha256"] = e.token_sha256;
    list.push_back(std::move(u));
  }
  RETURN_IF_ERROR(net::WritePrivateFile(path_, json{{"users", std::move(list)}}.dump(1) + "\n"));
  users_ = std::move(next);
  Reindex();
  return Status::Ok();
}

std::optional<net::Identity> UserBook::Authenticate(std::string_view token) const {
  if (token.size() != 64) return std::nullopt;
  auto it = by_hash_.find(HashOf(token));
  if (it == by_hash_.end()) return std::nullopt;
  const Entry& e = users_.at(it->second);
  return net::Identity{e.name, e.role};
}

Result<std::string> UserBook::Add(const std::string& name, net::Role role, Time now) {
  if (std::string why = CheckName(name); !why.empty()) return InvalidArgument(why);
  auto it = users_.find(name);
  if (it != users_.end() && !it->second.revoked) {
    return AlreadyExists("user " + name + " exists (drover user rotate " + name +
                         " gives a new token)");
  }
  ASSIGN_OR_RETURN(std::string token, net::GenerateToken());
  std::map<std::string, Entry> next = users_;
  Entry& e = next[name];
  if (it == users_.end()) e.created = now;
  e.name = name;
  e.role = role;
  e.token_sha256 = HashOf(token);
  e.changed = now;
  e.revoked = false;
  RETURN_IF_ERROR(Commit(std::move(next)));
  return token;
}

Status UserBook::Revoke(const std::string& name, Time now) {
  auto it = users_.find(name);
  if (it == users_.end()) return NotFound("no user " + name);
  if (it->second.revoked) return FailedPrecondition("user " + name + " is revoked already");
  if (it->second.role == net::Role::kAdmin) {
    size_t admins = 0;
    for (const auto& [n, e] : users_) admins += !e.revoked && e.role == net::Role::kAdmin;
    if (admins <= 1) {
      return FailedPrecondition(name + " is the last admin: add another admin before revoking " +
                                name);
    }
  }
  std::map<std::string, Entry> next = users_;
  Entry& e = next[name];
  e.revoked = true;
  e.token_sha256.clear();
  e.changed = now;
  return Commit(std::move(next));
}

Result<std::string> UserBook::Rotate(const std::string& name, Time now) {
  auto it = users_.find(name);
  if (it == users_.end()) return NotFound("no user " + name);
  if (it->second.revoked) {
    return FailedPrecondition("user " + name + " is revoked (drover user add " + name +
                              " makes it again)");
  }
  ASSIGN_OR_RETURN(std::string token, net::GenerateToken());
  std::map<std::string, Entry> next = users_;
  Entry& e = next[name];
  e.token_sha256 = HashOf(token);
  e.changed = now;
  RETURN_IF_ERROR(Commit(std::move(next)));
  return token;
}

const UserBook::Entry* UserBook::Find(const std::string& name) const {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

std::vector<UserBook::Entry> UserBook::List() const {
  std::vector<Entry> out;
  for (const auto& [name, e] : users_) out.push_back(e);
  return out;
}

}  // namespace drover::server
