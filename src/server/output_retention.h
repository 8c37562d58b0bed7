// OutputRetention: how long a succeeded task's output files stay kept on
// the worker that holds them (docs/design.md, "Data plane", Retention).
//
// The rule: a worker keeps the outputs of a job's tasks (not evictable from
// its cache, across its restarts) until the server releases the job. The
// server releases a job `keep` after it ended: every task terminal, and
// `keep` (`drover server --keep-outputs`, default 1 day) passed since its
// last change (Scheduler::LastChange, the end as --keep-finished counts
// it). Dependents are tasks of the same job, so a job that ended has no
// dependent left to run. A job the server forgot (--keep-finished, which
// bounds `keep`: outputs never outlive their job) or never knew is
// released at once. Until then GET /api/v1/tasks/{id}/outputs lists them;
// afterwards it answers that they were released (ReleasedNote), whatever
// the worker still has.
//
// Holders: a worker tells which jobs it keeps after each HelloAck
// (proto::OutputsKept), and each result with outputs says the same of its
// task's job (the channel calls Kept for both). That is all this class
// remembers (job -> workers), so it costs nothing per task, a restarted
// server learns the holders from the workers' next hellos, and a worker
// that was away when its job was released hears it as it attaches again.
//
// Release() is called by the server on a timer (interval(): a hundredth
// of `keep`, between 1 s and 10 min) with the clock's time; it looks at
// the jobs some worker keeps, one scheduler lookup each, and sends one
// ReleaseOutputs per worker for those due (to a worker not connected it is
// not resent: its next OutputsKept brings the answer).
//
// Thread safety: none; the server's event loop.
#ifndef DROVER_SERVER_OUTPUT_RETENTION_H_
#define DROVER_SERVER_OUTPUT_RETENTION_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"
#include "proto/messages.h"

namespace drover::server {

class OutputRetention {
 public:
  // Sends a message to a connected worker (WorkerChannel::Send);
  // kUnavailable when it is not connected.
  using SendFn = std::function<Status(WorkerId, const proto::ServerMessage&)>;

  // `keep_outputs`: --keep-outputs (zero: released as soon as the job
  // ended); `keep_finished`: --keep-finished (zero: jobs are kept forever),
  // which bounds it; `cache_keep`: --cache-keep, how long a job that holds
  // result cache entries (core/result_cache.h) keeps them, at least
  // keep_outputs and likewise bounded.
  OutputRetention(const core::Scheduler& scheduler, Duration keep_outputs, Duration keep_finished,
                  SendFn send, Duration cache_keep = Duration::zero());

  // How long outputs are kept after their job ended: the lower of the two.
  Duration keep() const { return keep_; }
  // The same for a job that holds result cache entries.
  Duration cache_keep() const { return cache_keep_; }
  // How often the server calls Release.
  Duration interval() const;

  // `worker` keeps the outputs of `jobs`: remembered as a holder; those
  // already due are released to it at once.
  void Kept(WorkerId worker, const std::vector<JobId>& jobs, Time now);

  // Sends ReleaseOutputs for every job due at `now` to each worker that
  // keeps it, and forgets those holders. Returns how many jobs it released.
  size_t Release(Time now);

  // Jobs some worker keeps outputs of, as far as this server knows.
  size_t held_jobs() const { return holders_.size(); }

  // Why `task`'s outputs are no longer kept at `now`: "outputs of 4.0 were
  // released 1d after job 4 ended (drover server --keep-outputs)", or
  // "... 7d ... (--cache-keep: it held result cache entries)"; empty
  // while they are kept (or the task is unknown).
  std::string ReleasedNote(TaskId task, Time now) const;

 private:
  // Whether the outputs of `job` are no longer kept at `now`.
  bool Due(JobId job, Time now) const;

  const core::Scheduler& scheduler_;
  Duration keep_;
  Duration cache_keep_;
  SendFn send_;
  std::map<JobId, std::set<WorkerId>> holders_;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_OUTPUT_RETENTION_H_
