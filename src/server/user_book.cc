#include "server/user_book.h"

#include <filesystem>

#include "net/private_file.h"
#include "net/token.h"

namespace drover::server {

Result<std::unique_ptr<UserBook>> UserBook::Open(std::string path, const std::string& first_admin,
                                                 const std::string& cluster_token, Time now) {
  std::unique_ptr<UserBook> book(new UserBook(path));
  book->cluster_hash_ = TokenHash(cluster_token);
  if (!net::PathExists(path)) {
    std::string name = first_admin;
    if (!CheckUserName(name).empty()) name = "admin";
    Entry e;
    e.name = name;
    e.role = net::Role::kAdmin;
    e.token_sha256 = TokenHash(cluster_token);
    e.created = e.changed = now;
    UserMap first;
    first[name] = std::move(e);
    RETURN_IF_ERROR(book->Commit(std::move(first)));
    return book;
  }
  // A file past the limit is refused unread: reading it could take all memory.
  std::error_code size_error;
  const uintmax_t bytes = std::filesystem::file_size(path, size_error);
  if (!size_error) RETURN_IF_ERROR(CheckUsersFileSize(bytes, path));
  ASSIGN_OR_RETURN(std::string text, net::ReadWholeFile(path));
  ASSIGN_OR_RETURN(book->users_, ParseUsersFile(text, path));
  book->Reindex();
  return book;
}

void UserBook::Reindex() {
  by_hash_.clear();
  for (const auto& [name, e] : users_) {
    if (!e.revoked) by_hash_[e.token_sha256] = name;
  }
}

Status UserBook::Commit(UserMap next) {
  RETURN_IF_ERROR(net::WritePrivateFile(path_, UsersFileText(next)));
  users_ = std::move(next);
  Reindex();
  return Status::Ok();
}

std::optional<net::Identity> UserBook::Authenticate(std::string_view token) const {
  if (token.size() != 64) return std::nullopt;
  auto it = by_hash_.find(TokenHash(token));
  if (it == by_hash_.end()) return std::nullopt;
  const Entry& e = users_.at(it->second);
  return net::Identity{e.name, e.role};
}

Result<std::string> UserBook::Add(const std::string& name, net::Role role, Time now) {
  if (std::string why = CheckUserName(name); !why.empty()) return InvalidArgument(why);
  auto it = users_.find(name);
  if (it != users_.end() && !it->second.revoked) {
    return AlreadyExists("user " + name + " exists (drover user rotate " + name +
                         " gives a new token)");
  }
  if (it == users_.end() && users_.size() >= kMaxUsers) {
    return FailedPrecondition("the server has the most users it may have (" +
                              std::to_string(kMaxUsers) + ", revoked ones included)");
  }
  ASSIGN_OR_RETURN(std::string token, net::GenerateToken());
  UserMap next = users_;
  Entry& e = next[name];
  if (it == users_.end()) e.created = now;
  e.name = name;
  e.role = role;
  e.token_sha256 = TokenHash(token);
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
  RETURN_IF_ERROR(ClusterTokenRule(name, it->second, "revoked"));
  UserMap next = users_;
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
  RETURN_IF_ERROR(ClusterTokenRule(name, it->second, "rotated"));
  ASSIGN_OR_RETURN(std::string token, net::GenerateToken());
  UserMap next = users_;
  Entry& e = next[name];
  e.token_sha256 = TokenHash(token);
  e.changed = now;
  RETURN_IF_ERROR(Commit(std::move(next)));
  return token;
}

Status UserBook::ClusterTokenRule(const std::string& name, const Entry& e,
                                  const char* change) const {
  if (e.token_sha256 != cluster_hash_) return Status::Ok();
  return FailedPrecondition(name +
                            "'s token is the cluster token (the server's token file), which " +
                            "workers, Slurm allocations and drover up's access file hold: it " +
                            "cannot be " + change + " without locking them out; give people " +
                            "tokens of their own (drover user add NAME --role admin)");
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
