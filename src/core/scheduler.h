// Scheduler: Drover's pure scheduling core (DESIGN.md sections 1-4).
//
// All scheduler state lives here. The shell feeds Events, each with the
// current time, and executes the Commands appended to its Outbox. There is
// no I/O, no clock and no thread inside: the same events at the same times
// always produce the same commands.
//
//   events ──► Handle ──► state change ──► Dispatch (placement at once,
//                                           on the workers/classes touched)
//                                   └──► commands appended to the outbox
//
// Scheduling is event-driven: a submitted task, a freed resource, a joined
// or undrained worker or a quota that frees up triggers placement inside the
// handling of that event. Placement claims leases (ClaimLeases) and marks the
// task assigned; AssignTask goes out only once the claim is granted.
//
// Lease timing rule (DESIGN.md section 4): the scheduler renews every held
// lease on Tick, batched per worker, every `renew_interval`. When a worker
// is lost it stops renewing that worker's leases and requeues its tasks only
// after the leases are gone: authoritatively when the shell reports
// LeaseFreed for the task (the store's expiry notification), or, as a
// fallback in case a notification is lost, once `lease_ttl + expiry_grace`
// has passed since the last renewal it sent. The grace covers the delay
// between sending a renewal and the store applying it.
//
// Thread safety: none; one thread (the shell's event loop) owns it.
#ifndef DROVER_CORE_SCHEDULER_H_
#define DROVER_CORE_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/commands.h"
#include "core/events.h"
#include "core/fair_share_report.h"
#include "core/placement.h"
#include "core/quarantine.h"
#include "core/queries.h"
#include "core/quota_report.h"
#include "core/records.h"
#include "core/result_cache.h"

namespace drover::core {

// Limits on what one user (or one group of users, together) may hold at
// once; 0 = unlimited.
struct UserQuota {
  int64_t max_cpus_milli = 0;
  int64_t max_gpus = 0;  // hundredths
  uint32_t max_tasks = 0;
  uint64_t max_mem_bytes = 0;  // memory requested by running attempts
  // Tasks queued (submitted, not yet assigned) at once: a submission that
  // would pass it is refused, naming the limit.
  uint64_t max_queued = 0;
  friend bool operator==(const UserQuota&, const UserQuota&) = default;
};

// Fair share across users with work queued at the same priority (Slurm's
// classic fair-share): each user's past use decays with `half_life`, and
// among equal priorities the user whose decayed use is smallest for their
// share goes first. Use is CPU-seconds plus `gpu_weight` x GPU-seconds.
struct FairShareConfig {
  bool enabled = true;
  Duration half_life = Seconds(24 * 3600);
  double gpu_weight = 1.0;
  // Shares per user or group name (groups as in UserPolicy::groups); a
  // user with none given has 1.
  std::map<std::string, double> shares;
  friend bool operator==(const FairShareConfig&, const FairShareConfig&) = default;
};

// Who may hold what, and how the pool is divided: set at start and
// replaced whole at run time (a server's config file reloaded on SIGHUP).
struct UserPolicy {
  std::map<std::string, UserQuota> quotas;                 // per user
  UserQuota default_quota;                                 // every user without a line
  std::map<std::string, UserQuota> group_quotas;           // per group, its members together
  std::map<std::string, std::vector<std::string>> groups;  // group -> member users
  // Groups whose members read each other's job contents (logs, results,
  // files: `share_outputs = true`); the server's access rules, not the core,
  // use it.
  std::set<std::string> sharing_groups;
  // Groups whose members reuse each other's result cache entries
  // (`share_cache = true`, only with share_outputs; result_cache.h).
  std::set<std::string> cache_sharing_groups;
  FairShareConfig fair_share;
  friend bool operator==(const UserPolicy&, const UserPolicy&) = default;
};

// Data locality (SchedulerConfig::locality): inputs smaller than this do
// not steer placement, and a task with more producers than
// kLocalityMaxProducers is placed without looking at them (its inputs are
// spread over many workers anyway, and counting them would cost each
// placement a walk over all).
inline constexpr uint64_t kLocalityMinBytes = 1ull << 20;
inline constexpr uint32_t kLocalityMaxProducers = 256;

struct SchedulerConfig {
  PolicyKind policy = PolicyKind::kSpread;
  Duration lease_ttl = Seconds(30);
  Duration renew_interval = Seconds(10);
  // Fallback expiry of a lost worker's leases: last renewal + ttl + grace.
  Duration expiry_grace = Seconds(10);
  // A task whose worker was lost this many times (over all its attempts;
  // a withdrawn or preempted attempt does not count) fails with
  // "worker lost (N attempts)".
  uint32_t max_lost_attempts = 3;
  // Ceiling of the exponential retry backoff.
  Duration max_retry_backoff = Seconds(600);
  // Give the highest blocked task a reservation so smaller tasks cannot
  // starve it (backfill). Off only for comparison.
  bool reservations = true;
  // Quotas, groups and fair share (replaced at run time by a reload).
  UserPolicy users;
  // After a restore, placement is held this long (or until every expected
  // worker has attached, whichever is first): a worker may still run an
  // attempt the journal never saw, and placing that task elsewhere before
  // the worker reports it would run it twice. 0: no hold.
  Duration restore_settle = Seconds(10);
  // Queue-ahead: when a ready task fits no free resources, it may be
  // assigned to a worker behind a task running there whose cores and memory
  // cover it (CPU-only requests), and the worker starts it the moment that
  // one exits, without a round trip to the server (AssignTask::after). The
  // resources pass from the one to the other in the core's accounting, so
  // nothing is booked twice. At most one task waits behind each, and none
  // overtakes a task ahead of it that could run on that worker.
  bool queue_ahead = false;
  // An attempt sent to a worker that has not reported it started this long
  // after the assignment went out (or after it stopped waiting behind
  // another, queue-ahead) is taken back: a hard KillTask to that worker,
  // its leases released, the task requeued without counting a failure. A
  // worker that heartbeats but never starts what it is given would
  // otherwise hold tasks forever. 0: never.
  Duration start_timeout = Seconds(30);
  // An attempt whose dependencies left files gets longer to start: the
  // worker fetches them first (docs/design.md, "Data plane"). The
  // deadline above grows by their size at this many bytes per second.
  uint64_t input_fetch_rate = 8ull << 20;
  // Data locality: among the workers where a ready task fits now and that
  // its policy ranks equal within a tolerance (PlacementPolicy::Comparable),
  // it goes to the one holding the most bytes of its input files, when that
  // is at least kLocalityMinBytes (docs/design.md, "Data plane"). Never a
  // reason to wait. Off only for comparison (drover sim --no-locality).
  bool locality = true;
  // Preemption by priority (preemption.h). A queued task of at least this
  // priority that heads its class and fits no worker now stops tasks on one
  // worker so that it fits there once they end: assigned or running
  // attempts of priority at most its own minus `preempt_gap`, whose group
  // is `preemptible`, not in their cool-down, on a live worker it could
  // ever run on; the fewest victims, then the lowest highest priority among
  // them, then the least work lost (the most recently started). Each gets a
  // vacating KillTask ("preempted by 14.2 (priority 90)"); their room is
  // held for the preemptor until they end, and each goes back to its queue
  // without using a retry. nullopt: off.
  std::optional<int32_t> preempt_priority;
  int32_t preempt_gap = 10;
  // A task preempted `max_preemptions` times is not preempted again until
  // `preempt_cooldown` has passed since its last preemption (and from then
  // on at most once per cool-down), so two tasks cannot thrash.
  uint32_t max_preemptions = 3;
  Duration preempt_cooldown = Seconds(600);
  // Black-hole quarantine (quarantine.h): on unless switched off.
  QuarantineConfig quarantine;
  // The result cache (result_cache.h): off without a digest.
  ResultCacheConfig result_cache;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Handles one event at time `now` and appends the resulting commands.
  // Returns OK, or an error describing why the event was ignored (unknown
  // worker/job/task, stale attempt, invalid job spec, ...); an ignored event
  // changes nothing and emits nothing. `now` must not go backwards.
  Status Handle(Time now, Event event, Outbox& out);

  // Handles a batch in order; returns the first error (and keeps going).
  Status HandleAll(Time now, std::span<Event> events, Outbox& out);

  // Submits a job and returns its id (the same as Handle(JobSubmitted)).
  // Errors: invalid spec (unknown or cyclic depends_on, duplicate group
  // names, bad resources), unknown --after job or task, id already used.
  Result<JobId> Submit(Time now, std::shared_ptr<const JobSpec> spec, Outbox& out, JobId job = 0);

  // --- restore --------------------------------------------------------------
  // Replays one journaled record into a fresh scheduler (before any other
  // event). Errors: record out of order (task of an unknown job, ...).
  Status Restore(const Record& record);
  // Ends replay: rebuilds queues and dependency counts and re-arms timers.
  // Tasks that were assigned or running keep that state; as their workers
  // are unknown, they are treated like tasks of a lost worker: requeued
  // (attempt + 1) when LeaseFreed arrives for them, or after
  // lease_ttl + expiry_grace from `now`, unless the worker reports
  // TaskStarted/TaskFinished for that attempt first.
  //
  // When the restored state knows any worker (ExpectWorkers, or the worker
  // of a restored assigned/running task) and config.restore_settle > 0, no
  // task is placed until every such worker has attached (WorkerAttached or
  // WorkerJoined) or restore_settle has passed (checked on Tick); placement
  // then resumes at once. Explain names the hold.
  void FinishRestore(Time now, Outbox& out);
  // Workers that may hold assignments the journal never saw (e.g. every
  // worker the server ever registered). Call before FinishRestore.
  void ExpectWorkers(std::span<const WorkerId> workers);

  // --- snapshot (snapshot.cc) -----------------------------------------------
  // The current state as records, for compaction: Restore(each) on a fresh
  // scheduler, then FinishRestore, gives the state that replaying every
  // record journaled so far gives (tests/core_sim checks this at random
  // points). Jobs by id, each job's tasks by index; per task its past
  // attempts as the records they came from, then its outcome and latest
  // record(s); a task still as its JobRecord made it has none. When the
  // highest job id ever used was forgotten, a tombstone for it comes first,
  // so no id is given twice after a restart. Also valid while restoring.
  std::vector<Record> Snapshot() const;
  // The same snapshot taken a slice at a time, so that a server's loop goes
  // on between slices (a million tasks take ~130 ms): StartSnapshot, then
  // SnapshotSlice until it returns true, each adding the records of at most
  // `max_tasks` tasks to `out`. Events may be handled between slices. Each
  // record persisted meanwhile either follows the snapshot in the new log
  // (SnapshotFollows: its task was taken already, or its job is newer than
  // the start, or it is a job's record) or is left out, because its task is
  // yet to be taken and the snapshot will hold its effect. Restoring the
  // snapshot and then the records that follow gives what replaying every
  // record gives (tests/core_sim checks this at random points).
  SnapshotCursor StartSnapshot() const;
  bool SnapshotSlice(SnapshotCursor& cursor, size_t max_tasks, std::vector<Record>& out) const;
  static bool SnapshotFollows(const SnapshotCursor& cursor, const Record& record);
  // A task's past attempts (those that ended with it queued again), oldest
  // first, at most kMaxPastAttempts; empty for an unknown task.
  static constexpr size_t kMaxPastAttempts = 16;
  std::vector<PastAttempt> PastAttempts(TaskId task) const;
  // When the job's state last changed (its latest record); nullopt for an
  // unknown or forgotten job.
  std::optional<Time> LastChange(JobId job) const;
  // True for an id that was given to a job that has since been forgotten.
  bool Forgotten(JobId job) const;

  // --- queries ----------------------------------------------------------------
  std::vector<JobId> Jobs() const;  // ascending
  Result<JobInfo> GetJob(JobId job) const;
  Result<TaskInfo> GetTask(TaskId task) const;
  // The job's task ids in order, starting at `offset`, at most `limit`.
  Result<std::vector<TaskId>> JobTasks(JobId job, uint32_t offset = 0,
                                       uint32_t limit = UINT32_MAX) const;
  std::vector<WorkerId> Workers() const;  // ascending
  // Result cache entries now (result_cache.h).
  size_t ResultCacheSize() const;
  // Workers quarantined as black holes since the start (quarantine.h).
  uint64_t QuarantineCount() const;
  Result<WorkerInfo> GetWorker(WorkerId worker) const;
  // The group spec a task belongs to (argv, env, resources). The pointer is
  // valid until the job is forgotten (ForgetJob).
  Result<const TaskGroupSpec*> GetSpec(TaskId task) const;
  // The spec a job was submitted with (shared: it outlives ForgetJob for
  // whoever holds it).
  Result<std::shared_ptr<const JobSpec>> GetJobSpec(JobId job) const;
  // Whether RetryJob{job} would run anything again: the number of its
  // failed and canceled tasks, or why not (FailedPrecondition naming what
  // to do first; ResourceExhausted past max_queued; NotFound).
  Result<uint64_t> CheckRetry(JobId job) const;

  // Why the task is where it is, for people: for a queued task the first
  // thing that keeps it from running, e.g. "no worker offers gpu_type A100",
  // "needs 2 GPUs, largest free is 1", "quota: gpus 8/8 for u1",
  // "held back: reservation for 12.7", "behind 5 tasks of its class" (and,
  // when users of its priority go first by fair share, "; fair share: ana
  // has used 3.2 CPU-h (share 1), bob 0.4 CPU-h goes first"),
  // "preempting 3.1, 3.4 on worker 2" (its victims are ending), "would
  // preempt 3.1, in cool-down until 2026-05-04 14:32:05 UTC" (its only
  // possible victims were preempted too often lately), "held back:
  // preemption by 14.2 on worker 2" (room kept for a preemptor);
  // "waiting for dependency 12.0" for a waiting task; the state and reason
  // otherwise. Errors: unknown task.
  Result<std::string> Explain(TaskId task) const;

  // Each user's and group's quota limits and what they hold and queue now
  // (quota_report.h).
  QuotaReport Quotas() const;
  // Every user's fair-share use decayed to `now` (or the latest event, if
  // later), share and standing (fair_share_report.h), by name.
  std::vector<FairShareLine> FairShares(Time now) const;

  // What no worker attached now could ever run, for the job's submitter:
  // one line per task group whose request no live worker offers (e.g.
  // "task group train: no worker offers gpu_type A100"), or a single "no
  // workers are connected" / "all workers are drained". Its tasks still
  // queue (a worker that fits may join). Empty when every group fits some
  // worker, and while the server settles after a restart (its workers are
  // still re-attaching). Errors: unknown job.
  Result<std::vector<std::string>> Unrunnable(JobId job) const;

  // How many queued tasks (ready, not in a retry backoff or held by a
  // quota) have a timeout of at most `max_timeout`, counting up to `cap`:
  // the work a worker that leaves after `max_timeout` could take (the
  // server's allocation queues, alloc.h).
  size_t QueuedWithin(Duration max_timeout, size_t cap) const;

  // The queued task that goes first among those asking exactly `request`
  // (its class's head: priority, then fair-share standing, then arrival),
  // leaving out tasks backing off or held by a quota; nullopt when there
  // is none. `drover sim` asks why that one waits.
  std::optional<TaskId> NextOfClass(const ResourceRequest& request) const;

  // Approximate heap bytes held by jobs, tasks, queues and workers (reasons
  // and results estimated from a sample: cheap at any size).
  size_t ApproxBytes() const;

  // --- retention (forget.cc) ------------------------------------------------
  // Forgets a done job (the server's --keep-finished): GetJob, GetTask and
  // JobTasks answer kNotFound for it and Jobs() no longer lists it; its
  // reasons and outcomes are dropped. Emits nothing (the caller journals
  // the removal). The job's slot keeps its task array (40 bytes a task:
  // queue entries and timers may still name them); a restart without its
  // records frees that. The caller must not forget a job another job still
  // names in --after: a restore of that job would not find it.
  // Errors: kNotFound for an unknown job, kFailedPrecondition while a task
  // is not terminal.
  Status ForgetJob(JobId job);

  const SchedulerConfig& config() const;

  // Everything the scheduler knows; opaque here. core/scheduler_state.h,
  // internal to src/core, defines it, and the core's handlers are free
  // functions that take it first, so they must be able to name it.
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_SCHEDULER_H_
