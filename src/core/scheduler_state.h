// Scheduler::State: everything the scheduler knows, in one struct made of
// parts.
//
// Internal to src/core (not part of the API). This header is the hub: it
// gathers the parts, each a type in its own header that opens with its
// invariants and who changes it:
//
//   task.h           Task (40 bytes), TaskFlags, Group, Job, Active, Extra
//   timers.h         TimerQueue: retry, timeout, expiry, start deadlines
//   user_account.h   a user's quota and usage, with the one quota check
//   reservation.h    the reservation and its backfill rules
//   queue_ahead.h    QueueAheadBook: waiters, holds, take-backs
//   preemption.h     PreemptionBook: preemptions in flight, counts
//   quarantine.h     QuarantineBook: black-hole evidence per worker
//   result_cache.h   ResultCache: results reused by content
//   adoption.h       Adoption: orphans, adoption and the settle hold after
//                    a restart
//   task_queue.h, worker_state.h, placement.h, ran_on.h (their own types)
//
// State keeps its data and, as members, only the lookups every part uses
// (task, IdOf, SpecOf, RequestOf, ClassOf, Find, FindWorker). The handlers
// and rules that work across the parts are free functions taking the
// state first (`State& s`), as in HyperQueue's reactor, declared one group
// to a header beside the .cc that defines them:
//
//   worker_events_ops.h   join, attach, heartbeat, lost, drained, paused
//   job_lifecycle_ops.h   submit, dependencies, ends, cancel, retry
//   attempt_events_ops.h  started, finished, refused, leases; Transition
//   ticks_ops.h           timers due (OnTick)
//   leases_ops.h          Active slots, lease keys, renewals
//   dispatch_ops.h        placement: class heads, CanPlace, Place
//   quotas_ops.h, fair_share_ops.h, reservation_ops.h, queue_ahead_ops.h,
//   preemption_ops.h, adoption_ops.h, lineage_ops.h, replicas_ops.h,
//   locality_ops.h, checkpoints_ops.h, lookup_ops.h, quarantine_ops.h,
//   result_cache_ops.h
//
// Replay is in restore.cc, queries in scheduler_queries.cc and explain.cc.
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_SCHEDULER_STATE_H_
#define DROVER_CORE_SCHEDULER_STATE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/adoption.h"
#include "core/fair_share.h"
#include "core/placement.h"
#include "core/preemption.h"
#include "core/quarantine.h"
#include "core/queue_ahead.h"
#include "core/ran_on.h"
#include "core/reservation.h"
#include "core/result_cache.h"
#include "core/scheduler.h"
#include "core/task.h"
#include "core/task_queue.h"
#include "core/timers.h"
#include "core/user_account.h"
#include "core/worker_state.h"

namespace drover::core {

struct Worker {
  std::unique_ptr<WorkerState> res;
  WorkerId id = 0;
  bool drained = false;
  bool lost = false;
  // When it was last lost: its outputs are gone a lease bound later
  // (lineage.cc).
  int64_t lost_us = 0;
  // Its owner is at it (WorkerPaused): nothing new goes to it.
  bool paused = false;
  std::string note;  // the worker's own word on its owner, shown to people
  Time note_since;
  // It refused an assignment (its own admission check disagreed with the
  // core's books): nothing new goes to it until its next heartbeat or
  // attach, so a refused task is placed elsewhere rather than bounced back.
  bool refusing = false;
  // Its own checks say it should take no work (WorkerHeartbeat::unhealthy):
  // why, and since when; empty: healthy.
  std::string unhealthy;
  Time unhealthy_since;
  // Its GPUs out of the offer (WorkerHeartbeat::sick_gpus): index -> why.
  std::map<uint32_t, std::string> sick_gpus;
  // Quarantined as a black hole: until when, and why, are in its
  // QuarantineBook entry (quarantine.h).
  bool quarantined = false;
  // Its offer has an end (WorkerResources::ends_at): kept here, beside the
  // flags CanPlace reads anyway, so placement on the others pays one test.
  bool ending = false;
  uint32_t offer_changes = 0;  // re-attached with a different offer
  Time offer_changed_at;
  bool dirty = false;       // queued in State::dirty_workers
  bool load_dirty = false;  // policy key needs an update
  bool in_policy = false;
  bool in_tails = false;  // listed in QueueAheadBook::tail_workers
  WorkerUtilization util;
  Time last_heartbeat;
  std::vector<uint32_t> actives;  // Active slots on this worker
};

struct User {
  UserAccount account;         // its quota and what it holds (user_account.h)
  std::deque<TaskRef> parked;  // quota-blocked, in queue order
};

struct Scheduler::State {
  explicit State(SchedulerConfig c);

  SchedulerConfig config;
  std::unique_ptr<PlacementPolicy> policy;
  TaskQueues queues;

  std::vector<Job> jobs;                // dense slots
  std::map<JobId, uint32_t> job_slots;  // id -> slot
  JobId next_job_id = 1;

  std::vector<User> users;
  std::map<std::string, uint32_t> user_ids;
  // Decayed use and standings (fair_share.h); standings go to `queues`
  // every Tick (UpdateStandings).
  FairShareBook fair_share;
  std::vector<double> standings_scratch;
  // Accounts of the groups in config.users (quotas.cc), shared with their
  // members' accounts.
  std::map<std::string, std::shared_ptr<GroupAccount>> group_accounts;

  std::vector<Worker> workers;  // dense slots in join order
  uint32_t lost_workers = 0;    // of them lost now (lineage.cc looks only then)
  std::unordered_map<WorkerId, uint32_t> worker_slots;

  std::vector<Active> actives;
  std::vector<uint32_t> free_actives;
  size_t pool_cores = 0;  // cores of every worker that ever joined (sizes `actives`)

  TimerQueue timers;

  std::unordered_map<uint64_t, Extra> extras;  // key: ExtraKey(ref)
  // Attempts that ended with their task queued again, oldest first, at most
  // kMaxPastAttempts a task; only tasks that had one. Key: ExtraKey(ref).
  std::unordered_map<uint64_t, std::vector<PastAttempt>> past;
  // The highest job id ForgetJob forgot and when, while no later job was
  // given an id: Snapshot keeps a tombstone for it.
  JobId forgotten_top = 0;
  int64_t forgotten_top_us = 0;
  // While restoring: jobs a tombstone forgot (their later records are
  // skipped).
  std::unordered_set<JobId> restored_forgotten;
  RanOn ran_on;  // placements of ended attempts (Task::ran_on)
  std::map<JobId, std::vector<uint32_t>> job_watchers;    // --after JOB: watcher job slots
  std::map<TaskId, std::vector<uint32_t>> task_watchers;  // --after JOB.TASK

  Reservation reservation;
  int64_t now_us = 0;
  int64_t next_renew_us = 0;
  bool restoring = true;  // until the first event or FinishRestore
  Adoption adoption;      // orphans, adoption, the settle hold (adoption.h)

  std::vector<uint32_t> dirty_workers;
  // Slots of the workers whose offer has an end (Ending), lost or not: a
  // class head that waits offers them its class again (FillLeavingWorker).
  std::vector<uint32_t> ending_workers;
  QueueAheadBook queue_ahead;  // waiters, holds, take-backs (queue_ahead.h)
  PreemptionBook preemption;   // preemptions in flight, counts (preemption.h)
  QuarantineBook quarantine;   // black-hole evidence (quarantine.h)
  ResultCache result_cache;    // key -> the task that ran (result_cache.h)
  // A Tick came: Dispatch offers the waiting heads preemption again.
  bool preempt_due = false;
  std::vector<uint32_t> dirty_classes;
  std::vector<uint8_t> class_dirty;
  std::vector<uint32_t> load_dirty;

  Outbox* out = nullptr;  // set during Handle

  // --- lookups (scheduler.cc); the others are free (lookup_ops.h) ---
  Task& task(TaskRef r) { return jobs[r.job].tasks[r.index]; }
  const Task& task(TaskRef r) const { return jobs[r.job].tasks[r.index]; }
  TaskId IdOf(TaskRef r) const { return TaskId{jobs[r.job].id, r.index}; }
  const TaskGroupSpec& SpecOf(TaskRef r) const { return jobs[r.job].spec->groups[task(r).group]; }
  const ResourceRequest& RequestOf(TaskRef r) const { return SpecOf(r).resources; }
  uint32_t ClassOf(TaskRef r) const { return jobs[r.job].groups[task(r).group].cls; }
  Result<TaskRef> Find(TaskId id) const;
  Result<uint32_t> FindWorker(WorkerId id) const;
};

// The reactor functions (the *_ops.h headers) name it State.
using State = Scheduler::State;

}  // namespace drover::core

#endif  // DROVER_CORE_SCHEDULER_STATE_H_
