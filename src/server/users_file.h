// The users file, <state_dir>/users.json (server/user_book.h), as text:
// its parser and its writer, apart from the file's reading and writing so
// that they can be fuzzed (fuzz/users_fuzz.cc). The file is the server's,
// mode 0600, but whoever can write the state directory can write it, so
// the parser trusts nothing in it:
//
//   {"users":[{"name":"ana","role":"user","token_sha256":"<64 hex>",
//              "created_us":1764738600000000,"changed_us":...,"revoked":false}]}
//
// A file ParseUsersFile accepts keeps UserBook's invariants: names valid
// (CheckUserName) and unique, every user not revoked with a token hash of
// 64 lower-case hex digits that no other such user has, at least one such
// admin. UsersFileText writes what ParseUsersFile reads back equal.
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_SERVER_USERS_FILE_H_
#define DROVER_SERVER_USERS_FILE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"
#include "net/identity.h"

namespace drover::server {

struct UserEntry {
  std::string name;
  net::Role role = net::Role::kUser;
  std::string token_sha256;  // empty once revoked
  Time created;
  Time changed;  // the last add, rotate or revoke
  bool revoked = false;
  friend bool operator==(const UserEntry&, const UserEntry&) = default;
};

// Users by name.
using UserMap = std::map<std::string, UserEntry>;

// The most users a book holds, revoked ones included (they stay in the
// file), and the most bytes a users file may have. UsersFileText of
// kMaxUsers users is under half of kMaxUsersFileBytes, so the server
// never writes a file it would refuse to read; the byte limit bounds what
// reading a file someone else wrote costs (a million users take seconds
// and gigabytes to parse).
inline constexpr size_t kMaxUsers = 100000;
inline constexpr size_t kMaxUsersFileBytes = 64 << 20;

// An error naming `path` when a users file of `bytes` is past
// kMaxUsersFileBytes; ok otherwise. For a reader to check before it reads.
Status CheckUsersFileSize(uint64_t bytes, const std::string& path);

// "" when `name` may name a user (a lower-case letter or '_', then up to 31
// of a-z, 0-9, '_', '-', '.'), else why not, quoting at most 64 bytes of it.
std::string CheckUserName(std::string_view name);

// The users of a users file's `text`. Errors: InvalidArgument whose message
// starts with `path` and names the entry and field that is wrong
// ("/s/users.json: users[3]: \"role\" must be admin, user, viewer or worker"),
// or what breaks an invariant above, or more than kMaxUsersFileBytes of
// text or kMaxUsers users.
Result<UserMap> ParseUsersFile(std::string_view text, const std::string& path);

// The file's text for `users` (indented, newline-terminated). A revoked
// user's token hash is not written.
std::string UsersFileText(const UserMap& users);

// What a users file keeps of a token: its SHA-256, 64 lower-case hex digits.
std::string TokenHash(std::string_view token);

}  // namespace drover::server

#endif  // DROVER_SERVER_USERS_FILE_H_
