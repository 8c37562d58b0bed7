// Events: everything that happens to the scheduler, as data.
//
// The shell turns messages from workers, clients, the store and its clock
// into these values and hands them to Scheduler::Handle together with the
// current time. The core never learns time any other way.
//
// Lease events name the task and the attempt whose lease set they concern:
// the shell recovers both from the slot key `lease:{worker}:slot:{task}` and
// from the owner value it wrote at claim time. A task's keys are claimed,
// renewed and released together, so one event per task suffices.
//
// Thread safety: plain values.
#ifndef DROVER_CORE_EVENTS_H_
#define DROVER_CORE_EVENTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/model.h"
#include "core/resources.h"

namespace drover::core {

// A worker connected (or reconnected) and reported what it offers.
struct WorkerJoined {
  WorkerId worker = 0;
  WorkerResources resources;
};
// Periodic liveness and utilisation report.
struct WorkerHeartbeat {
  WorkerId worker = 0;
  WorkerUtilization utilization;
  // Why the worker takes no new work by its own checks (a health-check
  // program, its disk); empty: healthy. Nothing new goes to it meanwhile;
  // what runs there goes on.
  std::string unhealthy;
  // Its GPUs that its checks found sick (NVML index -> why): out of the
  // offer while so; the others go on. Empty: none.
  std::map<uint32_t, std::string> sick_gpus;
};
// The shell decided the worker is gone (connection closed and liveness key
// expired). Its tasks are requeued only after their leases expire.
struct WorkerLost {
  WorkerId worker = 0;
};
// drained = true: take no new tasks (running ones continue); false: undrain.
struct WorkerDrained {
  WorkerId worker = 0;
  bool drained = true;
};
// paused = true: the worker offers no room for now (a workstation whose
// owner is at it); its tasks are suspended or vacated by the worker itself.
// `note` is what people see ("owner present since 14:02"), kept while
// offering again ("owner away since 14:30").
struct WorkerPaused {
  WorkerId worker = 0;
  bool paused = true;
  std::string note;
  Time since;  // when the owner came or went
};
// A new job. `job` = 0 lets the scheduler number it (next free id); the
// shell may pass an id it reserved instead.
struct JobSubmitted {
  JobId job = 0;
  std::shared_ptr<const JobSpec> spec;
};
// A person asked to cancel a whole job, or one task of it.
struct CancelJob {
  JobId job = 0;
};
struct CancelTask {
  TaskId task;
};
// A person asked for a job's failed and canceled tasks to run again
// (`drover retry`; Scheduler::CheckRetry says whether it can and how many
// tasks would). Each goes back to queued, or to waiting while a dependency
// of it has not succeeded yet, with its retries unused again and the reason
// "retried by BY"; the attempt that failed becomes history. Groups canceled
// because a dependency failed are no longer doomed. Refused (the event is
// ignored, the check says why) while a task of the job is being canceled,
// while a job or task it was submitted --after has failed or was canceled,
// or past the user's max_queued.
struct RetryJob {
  JobId job = 0;
  std::string by;  // who asked (the job's user or an admin); may be empty
};
// A person forgets result cache entries (core/result_cache.h): the one
// naming `task` (when its job is not 0), those of job `job` (when not 0),
// or with `all` every one of `user`'s (every one when `user` is empty).
// Each forgotten entry's task is marked in its outcome (journaled), so a
// restore does not bring it back; a later identical task runs.
struct ForgetCacheEntries {
  TaskId task;
  JobId job = 0;
  bool all = false;
  std::string user;
};
// The worker started the process of this attempt. `worker`, when not 0, is
// the worker that reports it: a report from any other worker than the one the
// attempt is on is stale (fencing: after a server restart two workers may run
// attempts with the same number, and only the current one may count).
struct TaskStarted {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
};
// The process of this attempt ended. `worker` as for TaskStarted.
struct TaskFinished {
  TaskId task;
  uint32_t attempt = 0;
  TaskOutcome outcome;
  WorkerId worker = 0;
  // It never started: the worker dropped it while it waited behind another
  // (withdrawn, canceled, fenced). Unless canceled, it goes back to its
  // queue without counting as a failure.
  bool never_started = false;
  // The worker vacated it on its own (its owner came back): not the task's
  // failure. It goes back to its queue without using a retry, and the
  // outcome's reason says why ("preempted: owner returned on ws-ana").
  bool vacated = false;
};
// The worker's own admission check refused the attempt (no room there by
// its books, which disagree with the core's): nothing ran. The attempt ends
// without counting as a failure, the task goes back to the front of its
// class, and the worker takes nothing new until its next heartbeat, so the
// task is placed on another worker when one has room. `worker` as for
// TaskStarted.
struct TaskRefused {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  std::string reason;  // the worker's, e.g. "core 3 is taken"
  // Inputs it could not get because every holder sent other bytes: the
  // producer task and the holder (lineage.cc, NoteCorruptCopy).
  std::vector<std::pair<TaskId, WorkerId>> corrupt;
};
// An attempt a worker still runs, with the resources its assignment gave it.
struct ReportedAttempt {
  TaskId task;
  uint32_t attempt = 0;
  std::vector<uint32_t> cores;
  std::vector<GpuGrant> gpus;
  // Not started: it waits on the worker behind another attempt
  // (AssignTask::after).
  bool queued = false;
};
// A worker connected (first time, after a loss, or again while known: a
// dropped connection, a restarted worker or a restarted server) with its
// own account of its attempts: the ones it still runs and the ones that
// ended without the server acknowledging their result. That account is the
// truth about the worker. Handled as one step, before any placement the
// join allows:
//   1. an unknown or lost worker joins with `resources` (as WorkerJoined);
//   2. every attempt the core has on this worker that the account lists
//      neither as running nor as finished is not there (the worker
//      restarted, or the assignment was lost with the old connection: the
//      worker reads nothing from a connection once it opened a new one), so
//      it is taken back at once: its leases released, the task requeued (a
//      started one as a lost attempt, an unstarted one without counting
//      anything). Only attempts whose claim is still pending stay: their
//      assignment goes out on the new connection when granted;
//   3. a known live worker that offers other `resources` than before takes
//      the new offer; attempts that no longer fit get a hard KillTask and
//      are requeued, without counting a failure, when their end comes back;
//   4. each finished attempt is handled as TaskFinished from this worker; an
//      attempt the journal never saw (the task is queued with a lower
//      attempt: the server crashed before the assignment was durable) is
//      adopted first, so its outcome counts and the task is not run again;
//   5. each running attempt that is current on this worker is confirmed
//      (assigned -> running; a restored or lost one is renewed again); one
//      the journal never saw is adopted: its exact cores/GPUs are booked if
//      free, its leases claimed, the task marked running there; every other
//      one (unknown task, task ended or re-assigned, resources taken) gets a
//      hard KillTask.
// Adoption (4, 5) is only for a worker's first attach after a restore, and
// only for workers the restore expected (Scheduler::ExpectWorkers, or the
// worker of a restored attempt): nobody else can hold an attempt the
// journal never saw. The attempt must also suit the worker (labels, GPU
// type, counters: WorkerState::CanEverFit). Anything else a worker claims
// is killed, never counted.
struct WorkerAttached {
  WorkerId worker = 0;
  WorkerResources resources;
  std::vector<ReportedAttempt> running;
  std::vector<TaskFinished> finished;
};
// The store granted all keys of the task's claim.
struct LeaseGranted {
  TaskId task;
  uint32_t attempt = 0;
};
// The store refused the claim (some key is held by someone else).
struct LeaseRejected {
  TaskId task;
  uint32_t attempt = 0;
};
// The task's leases are gone from the store: expired (TTL ran out) or
// deleted (released, by us or by reconciliation).
struct LeaseFreed {
  TaskId task;
  uint32_t attempt = 0;
  bool expired = true;
};
// The worker running attempt `attempt` of `task` saved its checkpoint
// directory: these files are in the server's file store (core/checkpoint.h).
// Kept as the task's latest checkpoint when the attempt is the task's
// latest one (running, or just ended) and on `worker`; a stale attempt's or
// an empty manifest is ignored (Stale).
struct CheckpointSaved {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  std::vector<OutputFile> files;
};
// Worker `worker` holds a complete, checked copy of the outputs of attempt
// `attempt` of `task`, as a ReplicateOutputs asked. Stale (ignored) unless
// that attempt is the task's succeeded one and the worker not a holder yet.
struct OutputsReplicated {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
};
// Time passed; drives retry backoffs, timeouts, lease renewal and the
// lost-worker expiry fallback. The shell sends one at least every renewal
// interval (SchedulerConfig::renew_interval).
struct Tick {};
// The users' quotas, groups and fair share were replaced (a server's config
// file reloaded on SIGHUP): they apply from now on. A raised limit takes
// parked tasks back and places them at once; a lowered one only holds new
// starts back (nothing running is stopped). Not journaled: the config file
// is its source, and a restart reads it again. `policy` is never null.
struct UserPolicy;
struct UserPolicyChanged {
  std::shared_ptr<const UserPolicy> policy;
};

using Event =
    std::variant<WorkerJoined, WorkerHeartbeat, WorkerLost, WorkerDrained, JobSubmitted, CancelJob,
                 CancelTask, TaskStarted, TaskFinished, LeaseGranted, LeaseRejected, LeaseFreed,
                 Tick, WorkerAttached, TaskRefused, WorkerPaused, CheckpointSaved,
                 OutputsReplicated, UserPolicyChanged, RetryJob, ForgetCacheEntries>;

}  // namespace drover::core

#endif  // DROVER_CORE_EVENTS_H_
