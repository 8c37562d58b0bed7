// Who a task runs as: the Unix account of a task, and how a worker picks it.
//
// A worker runs its tasks in one of two ways (docs/guide.md, "Who tasks run
// as"):
//   one account  every task as the same account: `--user NAME`; the
//                worker's own when it is not root (it cannot switch); root
//                with `--run-as-root`;
//   per user     a root worker started without `--user` runs each task as
//                the account of its job's user (proto::Assignment::user):
//                the account of the same name, or the one `--user-map
//                ana=alice` names. UserAccounts decides, at each task's
//                start, and refuses what it cannot run (below).
//
// Per-user refusals, each a message the worker reports as the task's
// failure reason:
//   - a task without a user (its server is older and sends none);
//   - a user name no account can have (empty, over 256 bytes, a control
//     character, '/', ':' or a space);
//   - a user with no account on this machine, mapped or not;
//   - a user whose account is root (uid 0), unless `--run-as-root`;
//   - a user whose same-named account is a system account (uid 1..999):
//     daemons' accounts (postgres, www-data) are reached only through an
//     explicit `--user-map`, never by naming a job's user after them.
// Accounts are looked up at each call (getpwnam_r, getgrouplist): an
// account added, removed or given other groups is seen by the next task.
//
// Threading: LookUpAccount is thread-safe; a UserAccounts is immutable
// after construction, so its const methods are too.
#ifndef DROVER_WORKER_EXEC_TASK_ACCOUNT_H_
#define DROVER_WORKER_EXEC_TASK_ACCOUNT_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/exec/spawn.h"

namespace drover::worker {

// One Unix account, as a task runs as it.
struct TaskAccount {
  std::string name;  // "alice": $USER and $LOGNAME
  std::string home;  // $HOME
  UserSwitch ids;    // uid, primary gid, supplementary groups (with the primary)
};

// Looks `name` up in the user database (getpwnam_r) with its groups
// (getgrouplist). NotFound when there is no such account; Unavailable when
// the lookup itself fails (the database cannot be read).
Result<TaskAccount> LookUpAccount(const std::string& name);

// Parses `--user-map` entries, "ana=alice" each, into user -> account.
// InvalidArgument naming the entry for one without '=', with an empty or
// invalid side (ValidAccountName), or a user given twice.
Result<std::map<std::string, std::string>> ParseUserMap(const std::vector<std::string>& entries);

// Whether `name` can be a user or account name: 1 to 256 bytes, none of
// them a control character, a space, '/' or ':'.
bool ValidAccountName(const std::string& name);

// The lowest uid an account may have to be taken for a job user of the
// same name (below it: a system account, reached only through the map).
inline constexpr uid_t kFirstUserUid = 1000;

// Per-user mode: the account of each job user.
class UserAccounts {
 public:
  using Lookup = std::function<Result<TaskAccount>(const std::string&)>;

  // `user_map`: job user -> account (ParseUserMap); `allow_root`: a user
  // whose account is root may run (`--run-as-root`); `worker_name` names
  // this worker in refusals. `lookup` (tests): in place of LookUpAccount.
  UserAccounts(std::map<std::string, std::string> user_map, bool allow_root,
               std::string worker_name, Lookup lookup = nullptr);

  // The account tasks of `job_user` run as. FailedPrecondition with the
  // reason for a refusal (the header's list), e.g. "user ana has no account
  // on worker w1 (map it with --user-map ana=ACCOUNT, or run every task as
  // one account with --user)"; Unavailable when the lookup fails.
  Result<std::shared_ptr<const TaskAccount>> For(const std::string& job_user) const;

  const std::map<std::string, std::string>& user_map() const { return user_map_; }

 private:
  std::map<std::string, std::string> user_map_;
  bool allow_root_;
  std::string worker_name_;
  Lookup lookup_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_TASK_ACCOUNT_H_
