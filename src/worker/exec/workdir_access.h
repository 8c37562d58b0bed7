// Whether tasks that run as other accounts can reach the worker's work
// directory.
//
// A root worker that runs tasks as other accounts (per user: each job's
// user; or one account, `--user NAME`) makes each task's directory under
// --workdir and hands it to that account. The account must pass through
// every directory on the way there: each needs the search (x) bit for it.
// A --workdir under a directory only root may enter (a private temporary
// directory, /root/...) made every such task fail at its start with
// "permission denied: working directory ...", retry after retry. The worker
// checks at start (and `drover worker --check` does) instead:
//
//   - the work directory itself is the worker's: one that lacks the search
//     bit for others is given it (0700 -> 0711), and the caller says so;
//   - a directory above it is not the worker's to change: the check fails
//     naming it, its mode and owner, and what to do.
//
// The directories that do not exist yet are not looked at: the worker
// makes them passable (0755 parents, a 0711 work directory).
//
// Thread safety: plain functions; they stat and chmod the real file
// system.
#ifndef DROVER_WORKER_EXEC_WORKDIR_ACCESS_H_
#define DROVER_WORKER_EXEC_WORKDIR_ACCESS_H_

#include <optional>
#include <string>

#include "common/status.h"
#include "worker/exec/spawn.h"

namespace drover::worker {

// What CheckWorkdirReachable did to the work directory, for the log: empty,
// or "gave /var/w1 the search bit for other accounts (mode 0700 -> 0711)".
struct WorkdirFix {
  std::string note;
};

// Checks `workdir` (absolute) for tasks running as `account`, or as any
// account but root when `account` is null (per user). FailedPrecondition
// for a directory above it they cannot pass, e.g. "tasks run as other
// accounts cannot reach --workdir /tmp/t.x/w1: /tmp/t.x (mode 0700, owner
// root) does not let them pass; give them its search bit (chmod o+x
// /tmp/t.x) or choose a --workdir they can reach"; Unavailable when a
// directory cannot be looked at or the work directory cannot be changed.
// With `fix` false (--check) the work directory is only looked at, and its
// missing bit is said in the note as what the start would do.
Result<WorkdirFix> CheckWorkdirReachable(const std::string& workdir,
                                         const UserSwitch* account, bool fix);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_WORKDIR_ACCESS_H_
