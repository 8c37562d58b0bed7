// Retention: finished jobs are forgotten some time after they ended
// (`drover server --keep-finished`, default 7 days; 0 keeps every job), so
// neither the server's memory nor the journal's snapshot grows with all of
// history.
//
// A job is due when every task is terminal and its last change (its latest
// journal record, Scheduler::LastChange) is `keep` or more before now. A
// due job is forgotten through CoreDriver::ForgetJob: the scheduler drops
// it and a tombstone record is journaled, so a restart does not bring it
// back and the next compaction leaves it out. A job that a job still held
// names in `--after` is kept until that one is forgotten (a restore of the
// dependent must find it); jobs are looked at in descending id order, so a
// chain of finished jobs goes in one pass. Afterwards the API answers a
// forgotten job's id with 404 and "expired" (CoreDriver::Expired) rather
// than as a job that never was.
//
// Prune() is called by the server on a timer (every min(keep / 100, 10 min),
// at least 1 s) with the clock's time; tests call it with a simulated one. It
// forgets at most kPruneTasks tasks' worth of jobs per call (a million-task
// job is one call on its own) and says whether more are due.
//
// Thread safety: none; the server's event loop.
#ifndef DROVER_SERVER_RETENTION_H_
#define DROVER_SERVER_RETENTION_H_

#include <cstdint>

#include "common/time.h"
#include "server/core_driver.h"

namespace drover::server {

class Retention {
 public:
  static constexpr uint64_t kPruneTasks = 200'000;

  // `keep`: zero keeps every job (Prune does nothing). `prune_tasks`: the
  // tasks' worth of jobs one Prune call forgets at most (tests make it
  // small).
  Retention(CoreDriver& driver, Duration keep, uint64_t prune_tasks = kPruneTasks)
      : driver_(driver), keep_(keep), prune_tasks_(prune_tasks) {}

  struct Pass {
    uint64_t jobs = 0;   // forgotten in this call
    uint64_t tasks = 0;  // their tasks
    bool more = false;   // more were due than this call took
  };
  // Forgets the jobs due at `now`, up to about `prune_tasks` tasks (always
  // at least one job when one is due).
  Pass Prune(Time now);

  Duration keep() const { return keep_; }
  // How often the server calls Prune.
  Duration interval() const;

 private:
  CoreDriver& driver_;
  Duration keep_;
  uint64_t prune_tasks_;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_RETENTION_H_
