// UserBook: the server's users, each with a role and a token (roles in
// net/identity.h). Requests are authenticated against it
// (Authenticate, ServerOptions::authenticate).
//
// File: <state_dir>/users.json, mode 0600 (its text: server/users_file.h),
// rewritten whole (atomically, net::WritePrivateFile) at every change,
// before the change takes effect in memory: a change that cannot be written
// (a full disk) is refused and changes nothing.
//
// Tokens are 256 random bits written as 64 hex digits, like the cluster
// token; only their SHA-256 is kept, and a presented token is looked up by
// its hash (for secrets of that length an unsalted hash leaves nothing to
// guess). A token is shown once, when it is made (Add, Rotate).
//
// First start: the book is made with one admin, `first_admin` (the account
// the server runs as), whose token is the cluster token (<state_dir>/token):
// everything that holds the cluster token today (workers, `drover up`'s
// clients, the access file) goes on working, as that admin.
//
// The cluster token's user (whoever holds the hash of <state_dir>/token:
// the first admin) is neither rotated nor revoked here: workers, Slurm
// allocations and `drover up`'s access file hold that token, and would be
// locked out at their next connection (ClusterTokenRule).
//
// Invariants: names are unique and shaped like Unix account names (a
// lower-case letter or '_', then up to 31 of [a-z0-9_.-]); every user not
// revoked has one token hash, different from every other user's; at least
// one admin is not revoked (Revoke and a role change refuse to end that).
//
// Thread safety: none; used on the server's event loop.
#ifndef DROVER_SERVER_USER_BOOK_H_
#define DROVER_SERVER_USER_BOOK_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "net/identity.h"
#include "server/users_file.h"

namespace drover::server {

class UserBook {
 public:
  using Entry = UserEntry;

  // Reads `path`, or makes it with the first admin when it does not exist.
  // Errors: a file that is not a users file (ParseUsersFile: naming the
  // path, the entry and what is wrong), or one that cannot be read or
  // written.
  static Result<std::unique_ptr<UserBook>> Open(std::string path, const std::string& first_admin,
                                                const std::string& cluster_token, Time now);

  // The identity whose token this is; nullopt for an unknown or revoked one.
  std::optional<net::Identity> Authenticate(std::string_view token) const;

  // A new user (or a revoked one made again), and its token. Errors:
  // InvalidArgument for a bad name, AlreadyExists for an active user,
  // FailedPrecondition for a new name when the book holds kMaxUsers.
  Result<std::string> Add(const std::string& name, net::Role role, Time now);
  // Ends the user's token at once. Errors: NotFound; FailedPrecondition for
  // the last admin or a user already revoked.
  Status Revoke(const std::string& name, Time now);
  // A new token for the user; the old one stops working. Errors: NotFound,
  // FailedPrecondition for a revoked user.
  Result<std::string> Rotate(const std::string& name, Time now);

  const Entry* Find(const std::string& name) const;
  std::vector<Entry> List() const;  // by name
  const std::string& path() const { return path_; }

 private:
  UserBook(std::string path) : path_(std::move(path)) {}
  // Writes `next` to the file, then makes it the book.
  Status Commit(UserMap next);
  void Reindex();

  // Refuses changing the token of `e` when it is the cluster token.
  Status ClusterTokenRule(const std::string& name, const Entry& e, const char* change) const;

  std::string path_;
  std::string cluster_hash_;                                 // TokenHash of the cluster token
  UserMap users_;                                            // by name
  std::map<std::string, std::string, std::less<>> by_hash_;  // token hash -> name (active only)
};

}  // namespace drover::server

#endif  // DROVER_SERVER_USER_BOOK_H_
