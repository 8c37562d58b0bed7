// Reaper: a small process that ends a worker's tasks when the worker dies.
//
// A task runs in its own session, so when its worker is killed (kill -9,
// the OOM killer, a crash) nothing ends it: it is reparented to init and
// runs on, on cores the server will soon give to its next attempt. The
// reaper closes that gap. The worker forks it at start (Reaper::Start) and
// keeps the only other end of a socket pair to it; the reaper blocks
// reading that socket, and
//   Watch(pid)      a task's process group (leader `pid`) started;
//   Forget(pid)     it ended (sent before its leader is reaped, so the
//                   reaper never holds a process group number that the
//                   kernel may hand out again);
//   end of file     the worker is gone without saying goodbye: the reaper
//                   sends SIGKILL to every process group it watches whose
//                   leader it still finds through its pidfd (a group whose
//                   leader was gone when it looked is left: its number may
//                   be another's by then; only on a kernel without pidfds,
//                   before 5.3, is a group killed by number unchecked) and to every
//                   process in the cgroup trees it was given (cgroup.kill
//                   on cgroup v2; freeze, kill, thaw on v1), waits (at
//                   most ~5 s) until the trees are empty, removes them
//                   (each empty cgroup, deepest first), runs its last
//                   program if it was given one (Start's `then`), and exits;
//   the destructor  the worker stops cleanly (its tasks were killed
//                   already): a goodbye, then end of file, and the reaper
//                   exits without killing anything.
//   SetDeadline(d)  a watchdog: if the worker says nothing more within d
//                   (measured on CLOCK_BOOTTIME, so a suspended machine's
//                   sleep counts, as it does for the server's leases), it
//                   is stopped (SIGSTOP), stalled or swapped out past its
//                   fencing deadline, and its tasks' leases are about to
//                   expire: the reaper kills every task as the worker's own
//                   fencing would, counts it in fences(), and goes on
//                   waiting (the worker may resume; it reports those tasks
//                   fenced). The worker renews the deadline while it runs
//                   (agent.cc, TellReaper); ClearDeadline disarms it.
// With cgroup isolation the trees are the worker's cgroup roots (every task
// cgroup is below them), so Watch is not needed; with rlimit and none the
// watched process groups are all there is (a grandchild that called setsid
// escapes, as it escapes the executor's own kill).
//
// The reaper runs in its own session (a Ctrl-C or a signal to the worker's
// process group does not reach it), named "drover-reaper" in ps, with
// /dev/null as stdin, stdout and stderr, and keeps one more descriptor of
// the worker's: `keep_fd` (the work directory's lock, see life_record.h),
// so that the lock is free only once the worker and its reaper are both
// gone. Between fork and exit it makes only async-signal-safe calls on
// memory of its own (the worker may have threads).
//
// If the reaper dies first (killed on its own), Watch and Forget fail; the
// worker goes on, and a later death of the worker is then covered only by
// the restart scan (leftovers.h).
//
// Threading: a Reaper belongs to one thread (the worker's loop).
#ifndef DROVER_WORKER_EXEC_REAPER_H_
#define DROVER_WORKER_EXEC_REAPER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

class Reaper {
 public:
  // Forks the reaper. `cgroup_roots`: directories whose whole cgroup tree
  // is killed at the worker's death (at most 8, each under 4000 bytes).
  // `keep_fd`: a descriptor the reaper keeps open (-1: none). Fails when
  // the socket pair or the fork fails, or the roots are too many or long.
  // `then`: a program (absolute path first) the reaper becomes once it has
  // killed the trees at the worker's death, with `then_env` as its whole
  // environment ("K=V"; at most 16 arguments and 8 variables, each under
  // 4000 bytes): the removal of the containers the runtime still lists
  // as running (their processes were in the trees).
  static Result<std::unique_ptr<Reaper>> Start(const std::vector<std::string>& cgroup_roots,
                                               int keep_fd,
                                               const std::vector<std::string>& then = {},
                                               const std::vector<std::string>& then_env = {});
  // A page shared with the reaper.
  struct Shared {
    uint32_t fences = 0;  // deadlines that passed (tasks killed), atomic
  };
  // Says goodbye (the reaper exits without killing) and reaps it.
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Registers / unregisters the process group whose leader is `pid`.
  // Fails (Unavailable) when the reaper cannot be told: it died.
  Status Watch(pid_t pid);
  Status Forget(pid_t pid);
  // Arms (or moves) the watchdog: every task is killed unless another
  // SetDeadline or ClearDeadline comes within `from_now`.
  Status SetDeadline(Duration from_now);
  Status ClearDeadline();
  // How many times the watchdog fired since Start.
  uint32_t fences() const;

  pid_t pid() const { return pid_; }

 private:
  Reaper(pid_t pid, int fd, Shared* shared) : pid_(pid), fd_(fd), shared_(shared) {}
  Status Send(char op, pid_t pid, int64_t ms = 0);
  pid_t pid_;
  int fd_;
  Shared* shared_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_REAPER_H_
