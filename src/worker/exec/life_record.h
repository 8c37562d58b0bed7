// LifeRecord: what one life of a worker writes down so that its next life
// finds, and ends, every task process the first one left running.
//
// A worker killed with its reaper (reaper.h) leaves its tasks running; the
// next start on the same work directory ends them before it takes any
// work (DESIGN.md section 4, the timing rule). The record lives in a state
// directory of the worker's own (<workdir>/.worker, mode 0700):
//   lock     an exclusive flock(2), held by the worker and its reaper: a
//            second worker on the same work directory is refused, and a new
//            life waits (briefly) for the previous life's reaper to finish.
//            The file holds the holder's pid, for the refusal's message.
//   cgroups  the cgroup roots of the life (Isolator::cgroup_roots): every
//            task cgroup is below one of them. The next life kills every
//            process in those trees and removes them.
//   tasks    for isolation without cgroups (rlimit, none): an append-only
//            log, "+ PID START NAME" when a task's process group starts
//            (PID its leader, START the leader's start time in clock ticks
//            since boot, /proc/PID/stat field 22), "- PID" when it ended.
//            The next life kills a group whose leader still has that pid
//            AND that start time, so a recycled pid is never killed; a
//            group whose leader is gone is reached through the members
//            still in it (same group id, started no earlier than the
//            leader; see EndPreviousLife for the one case this may not
//            tell apart).
// Every kill goes through a pidfd opened before the process is checked,
// so a process that died and whose pid was reused in between is not hit.
//
// Decision: leftovers are killed, not adopted. Adoption would
// need the exit status of a process that is not the new life's child, its
// output pipes (gone with the old life) and its cgroup accounting: the
// simple honest answer is to end it, and not to list it in the hello, so
// the server requeues the attempt at once.
//
// Threading: one thread (the worker's loop, or start-up).
#ifndef DROVER_WORKER_EXEC_LIFE_RECORD_H_
#define DROVER_WORKER_EXEC_LIFE_RECORD_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

// What /proc/PID/stat says of a process.
struct ProcStat {
  char state = '?';          // R, S, D, Z, ...
  pid_t pgrp = -1;           // its process group
  uint64_t start_ticks = 0;  // start time, clock ticks since boot
};
// Reads /proc/PID/stat under `proc_root`; nullopt when the process is gone
// or the line cannot be parsed.
std::optional<ProcStat> ReadProcStat(pid_t pid, const std::string& proc_root = "/proc");

// What EndPreviousLife found and did.
struct LeftoverReport {
  size_t processes_killed = 0;
  // Tasks found running: the names the tasks log recorded, and the names
  // of the task cgroups that held processes (cgroup v2 names them after
  // the attempt, "12.3.1"; cgroup v1 reuses "t<N>").
  std::vector<std::string> tasks;
  // What could not be done, one line each (a cgroup that could not be
  // removed, a recorded pid now used by another process).
  std::vector<std::string> notes;
};

class LifeRecord {
 public:
  // Makes `dir` (0700) if needed and takes its lock, retrying for up to
  // `wait` while another process holds it (a previous life's reaper that
  // is still killing). Fails with FailedPrecondition when the lock stays
  // held ("... is in use by another worker (pid N)"), Unavailable when the
  // directory or the lock file cannot be made.
  static Result<std::unique_ptr<LifeRecord>> Open(const std::string& dir, Duration wait,
                                                  std::string proc_root = "/proc");
  ~LifeRecord();
  LifeRecord(const LifeRecord&) = delete;
  LifeRecord& operator=(const LifeRecord&) = delete;

  // Ends what the previous life recorded: kills every process in its
  // cgroup trees (freezing v1 trees first) and every recorded process
  // group it can still prove its own, waits up to `wait` for them to die,
  // removes the trees, and clears the records. Cgroup roots that another
  // life in this process recorded (several workers in `drover up` share
  // one per-process root) are left alone. Fails only when the records
  // cannot be read or cleared; what it could not kill or remove is in the
  // report's notes.
  Result<LeftoverReport> EndPreviousLife(Duration wait);

  // Writes this life's cgroup roots (replacing the previous life's).
  Status RecordCgroupRoots(const std::vector<std::string>& roots);

  // The task `name` ("12.3.1") runs in the process group led by `pid`
  // (which must exist), or that group has been killed and is about to be
  // reaped. One append each; Fails (Unavailable) when the log cannot be
  // written or `pid`'s start time cannot be read.
  Status TaskStarted(pid_t pid, std::string_view name);
  Status TaskEnded(pid_t pid);

  // The lock's descriptor, for the reaper to hold too.
  int lock_fd() const { return lock_fd_; }
  const std::string& dir() const { return dir_; }

 private:
  LifeRecord(std::string dir, std::string proc_root, int lock_fd)
      : dir_(std::move(dir)), proc_root_(std::move(proc_root)), lock_fd_(lock_fd) {}
  Status Append(const std::string& line);
  Status Compact();

  std::string dir_;
  std::string proc_root_;
  int lock_fd_ = -1;
  int tasks_fd_ = -1;  // the tasks log, O_APPEND; opened by EndPreviousLife
  // Live entries (the log's lines that a later "-" has not cancelled), and
  // the bytes written since the last compaction.
  std::map<pid_t, std::string> live_;
  uint64_t written_ = 0;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_LIFE_RECORD_H_
