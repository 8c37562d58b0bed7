#include "worker/exec/task_account.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace drover::worker {

Result<TaskAccount> LookUpAccount(const std::string& name) {
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc;
  // ERANGE: an entry larger than the buffer (long GECOS fields, many lines).
  while ((rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (found == nullptr) {
    // 0, ENOENT, ESRCH, EBADF and EPERM all mean "no such name" to glibc's
    // callers; anything else is a database that could not be read.
    if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM) {
      return NotFound("no account " + name);
    }
    return Unavailable("cannot look up account " + name + ": " + std::strerror(rc));
  }
  TaskAccount account;
  account.name = pw.pw_name;
  account.home = pw.pw_dir;
  account.ids.uid = pw.pw_uid;
  account.ids.gid = pw.pw_gid;
  int n = 64;
  account.ids.groups.resize(n);
  while (getgrouplist(pw.pw_name, pw.pw_gid, account.ids.groups.data(), &n) < 0) {
    // n now holds the count needed (or is unchanged on an error).
    if (static_cast<size_t>(n) <= account.ids.groups.size()) {
      return Unavailable("cannot list the groups of account " + name);
    }
    account.ids.groups.resize(n);
  }
  account.ids.groups.resize(n);
  return account;
}

bool ValidAccountName(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == ' ' || c == '/' || c == ':') return false;
  }
  return true;
}

Result<std::map<std::string, std::string>> ParseUserMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> map;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("--user-map " + entry + ": expected USER=ACCOUNT (ana=alice)");
    }
    std::string user = entry.substr(0, eq);
    std::string account = entry.substr(eq + 1);
    if (!ValidAccountName(user) || !ValidAccountName(account)) {
      return InvalidArgument("--user-map " + entry +
                             ": a user and an account are names of 1 to 256 characters without "
                             "spaces, '/', ':' or control characters");
    }
    if (map.count(user) != 0) {
      return InvalidArgument("--user-map " + entry + ": user " + user + " is mapped twice");
    }
    map.emplace(std::move(user), std::move(account));
  }
  return map;
}

UserAccounts::UserAccounts(std::map<std::string, std::string> user_map, bool allow_root,
                           std::string worker_name, Lookup lookup)
    : user_map_(std::move(user_map)),
      allow_root_(allow_root),
      worker_name_(std::move(worker_name)),
      lookup_(lookup ? std::move(lookup) : Lookup(LookUpAccount)) {}

Result<std::shared_ptr<const TaskAccount>> UserAccounts::For(const std::string& job_user) const {
  const std::string worker = "worker " + worker_name_;
  if (job_user.empty()) {
    return FailedPrecondition(
        "the task has no user (its server sends none: it is older than this worker), and " +
        worker +
        " runs each task as its user's account (run every task as one account with "
        "--user)");
  }
  if (!ValidAccountName(job_user)) {
    return FailedPrecondition("user name \"" + job_user + "\" cannot be an account on " + worker);
  }
  auto mapped = user_map_.find(job_user);
  const bool by_map = mapped != user_map_.end();
  const std::string& name = by_map ? mapped->second : job_user;
  Result<TaskAccount> found = lookup_(name);
  if (!found.ok()) {
    if (found.status().code() != StatusCode::kNotFound) {
      return Unavailable("user " + job_user + " on " + worker + ": " + found.status().message());
    }
    if (by_map) {
      return FailedPrecondition("user " + job_user + " maps to account " + name +
                                " (--user-map), which does not exist on " + worker);
    }
    return FailedPrecondition("user " + job_user + " has no account on " + worker +
                              " (map it with --user-map " + job_user +
                              "=ACCOUNT, or run every task as one account with --user)");
  }
  if (found->ids.uid == 0) {
    if (!allow_root_) {
      return FailedPrecondition("user " + job_user + " maps to root on " + worker +
                                ": running tasks as root needs --run-as-root");
    }
  } else if (!by_map && found->ids.uid < kFirstUserUid) {
    return FailedPrecondition(
        "user " + job_user + " names a system account (uid " + std::to_string(found->ids.uid) +
        ") on " + worker + ": only --user-map " + job_user + "=" + name + " can run tasks as it");
  }
  return std::make_shared<const TaskAccount>(std::move(found).value());
}

}  // namespace drover::worker
