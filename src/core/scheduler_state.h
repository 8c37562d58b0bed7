// Scheduler::State: everything the scheduler knows, in one struct made of
// parts.
//
// Internal to src/core (not part of the API). This header is the hub: it
// gathers the parts, each a type in its own header that opens with its
// invariants and who changes it, and declares the functions of State, which
// are the handlers and rules working across them:
//
//   task.h           Task (40 bytes), TaskFlags, Group, Job, Active, Extra
//   timers.h         TimerQueue: retry, timeout, expiry, start deadlines
//   user_account.h   a user's quota and usage, with the one quota check
//   reservation.h    the reservation and its backfill rules
//   queue_ahead.h    QueueAheadBook: waiters, holds, take-backs
//   preemption.h     PreemptionBook: preemptions in flight, counts
//   adoption.h       Adoption: orphans, adoption and the settle hold after
//                    a restart
//   task_queue.h, worker_state.h, placement.h, ran_on.h (their own types)
//
// What each function does lives in one .cc: the event handlers and the task
// lifecycle in scheduler.cc, Active slots and leases in leases.cc, placement
// in dispatch.cc, reservations and backfill in reservation.cc, queue-ahead
// and take-back in queue_ahead.cc, preemption in preemption.cc, re-attach
// and adoption in adoption.cc, replay in restore.cc, queries in
// scheduler_queries.cc and explain.cc.
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
#include "core/queue_ahead.h"
#include "core/ran_on.h"
#include "core/reservation.h"
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
  // Keeps w's place in ending_workers true to its current offer.
  void NoteEnding(uint32_t w) {
    workers[w].ending = workers[w].res->resources().ends_at.has_value();
    auto it = std::find(ending_workers.begin(), ending_workers.end(), w);
    if (Ending(w) && it == ending_workers.end()) ending_workers.push_back(w);
    if (!Ending(w) && it != ending_workers.end()) ending_workers.erase(it);
  }
  QueueAheadBook queue_ahead;  // waiters, holds, take-backs (queue_ahead.h)
  PreemptionBook preemption;   // preemptions in flight, counts (preemption.h)
  // A Tick came: Dispatch offers the waiting heads preemption again.
  bool preempt_due = false;
  std::vector<uint32_t> dirty_classes;
  std::vector<uint8_t> class_dirty;
  std::vector<uint32_t> load_dirty;

  Outbox* out = nullptr;  // set during Handle

  // --- lookups (scheduler.cc) ---
  static uint64_t ExtraKey(TaskRef r) { return (uint64_t{r.job} << 32) | r.index; }
  Task& task(TaskRef r) { return jobs[r.job].tasks[r.index]; }
  const Task& task(TaskRef r) const { return jobs[r.job].tasks[r.index]; }
  TaskId IdOf(TaskRef r) const { return TaskId{jobs[r.job].id, r.index}; }
  // How long its worker has to start an attempt of `r`: start_timeout,
  // plus the time to fetch its dependencies' output files at
  // input_fetch_rate.
  Duration StartBoundOf(TaskRef r) const;
  // Calls f(producer, outcome, group) for each task whose result and output
  // files `r` receives, that has an outcome: the tasks of its group's
  // dependency groups (`group`: the producer group's name, which r's
  // `inputs` select files of) and the tasks its job names in --after
  // (`group` null: all their files).
  template <typename F>
  void ForEachInput(TaskRef r, F&& f) const {
    if (extras.empty()) return;
    const Job& job = jobs[r.job];
    for (uint32_t d : job.groups[task(r).group].deps) {
      const Group& g = job.groups[d];
      for (uint32_t i = g.first; i < g.first + g.count; ++i) {
        auto it = extras.find(ExtraKey(TaskRef{r.job, i}));
        if (it == extras.end() || !it->second.outcome) continue;
        f(TaskId{job.id, i}, *it->second.outcome, &job.spec->groups[d].name);
      }
    }
    for (const TaskId& after : job.spec->after_tasks) {
      auto slot = job_slots.find(after.job);
      if (slot == job_slots.end()) continue;
      auto it = extras.find(ExtraKey(TaskRef{slot->second, after.index}));
      if (it == extras.end() || !it->second.outcome) continue;
      f(after, *it->second.outcome, static_cast<const std::string*>(nullptr));
    }
  }
  // The bytes of `o`'s files that r receives (see ForEachInput).
  uint64_t InputBytes(TaskRef r, const TaskOutcome& o, const std::string* group) const;
  // How many producers ForEachInput would visit at most.
  uint64_t ProducerCount(TaskRef r) const;
  // Worker slot `w` is the policy's choice for `r`: the worker holding the
  // most of r's input bytes instead, when r fits there now and the policy
  // ranks it equal within its tolerance (SchedulerConfig::locality).
  uint32_t NearInputs(TaskRef r, uint32_t w);
  const TaskGroupSpec& SpecOf(TaskRef r) const { return jobs[r.job].spec->groups[task(r).group]; }
  const ResourceRequest& RequestOf(TaskRef r) const { return SpecOf(r).resources; }
  uint32_t ClassOf(TaskRef r) const { return jobs[r.job].groups[task(r).group].cls; }
  Result<TaskRef> Find(TaskId id) const;
  Result<uint32_t> FindWorker(WorkerId id) const;
  uint32_t UserOf(const std::string& name);
  Reason ReasonOf(TaskRef r) const;
  // Why a kill for a cancel was sent (Cancel), for the record that ends it.
  Reason CancelReasonOf(TaskRef r) const;

  // --- lifecycle (scheduler.cc) ---
  Status OnWorkerJoined(WorkerJoined& e);
  Status OnWorkerAttached(WorkerAttached& e);
  // The live worker in slot `w` re-attached offering `resources` instead of
  // what it offered: its books start again from the new offer. Attempts on
  // it that no longer fit are stopped at once (KillTask hard) and their end
  // requeues them without counting a failure (TaskFlag::kResized).
  void Reoffer(uint32_t w, WorkerResources resources);
  // Books every attempt on `w` that is not booked yet (and waits behind
  // none); one that does not fit there is stopped as Reoffer says.
  void StopUnfitting(uint32_t w);
  // Adds `w` to / removes it from the placement policy to match Schedulable.
  void SyncPolicy(uint32_t w);
  Status OnHeartbeat(WorkerHeartbeat& e);
  Status OnWorkerLost(const WorkerLost& e);
  Status OnDrained(const WorkerDrained& e);
  Status OnPaused(const WorkerPaused& e);
  Result<JobId> OnSubmit(JobId id, std::shared_ptr<const JobSpec> spec);
  Status OnCancelJob(JobId job);
  Status OnCancelTask(TaskId task);
  // RetryJob (events.h): Retryable checks it and counts the tasks.
  Result<uint64_t> Retryable(uint32_t j) const;
  Status OnRetryJob(const RetryJob& e);
  // Failed or canceled `r` runs again: the attempt that ended it becomes
  // history (as a retried one does), unless it already is, and its
  // finished time is that of its latest attempt (0 if it never had one).
  void NoteRetriedAttempt(TaskRef r);
  Status OnStarted(const TaskStarted& e);
  Status OnFinished(TaskFinished& e);
  Status OnRefused(const TaskRefused& e);
  Status OnGranted(const LeaseGranted& e);
  // Checkpoints (checkpoints.cc): the latest saved manifest per task.
  Status OnCheckpointSaved(const CheckpointSaved& e);
  void RestoreCheckpoint(const CheckpointRecord& record);
  std::shared_ptr<const Checkpoint> CheckpointOf(TaskRef r) const;
  Status OnRejected(const LeaseRejected& e);
  Status OnFreed(const LeaseFreed& e);
  void OnTick();

  // Builds a job's structures from its spec (no commands). Used by submit
  // and restore.
  Result<uint32_t> CreateJob(JobId id, std::shared_ptr<const JobSpec> spec, Time at);
  // Moves a task to `to`, updating counts, and emits StateChanged + Persist.
  void Transition(TaskRef r, TaskState to, Reason why = {});
  // The attempt of `r` that was `from` (assigned or running) ended at
  // `at_us` with the task queued again for `reason`: kept in `past`.
  void NotePastAttempt(TaskRef r, TaskState from, int64_t at_us, const Reason& why);
  // Drops a job's slot (ForgetJob, or a tombstone while restoring).
  void DropJob(uint32_t slot);
  // Called when a task succeeded: satisfies dependents.
  void OnSucceeded(TaskRef r);
  // Called when a task ended failed or canceled for good: cancels what
  // depends on it.
  void OnEndedBadly(TaskRef r, const Reason& why);
  void SatisfyGroup(uint32_t job, uint32_t group);
  void DoomJob(uint32_t job, const Reason& why);
  void DoomGroup(uint32_t job, uint32_t group, const Reason& why);
  // Cancels one task, whatever its state (kill and wait for the worker if it
  // runs). Returns true if it is now canceled or will be.
  void Cancel(TaskRef r, const Reason& why);
  // Makes a queued task ready: into its class queue.
  void Enqueue(TaskRef r, bool front);
  void PushTimer(int64_t at_us, TimerKind kind, TaskRef r, uint32_t attempt);
  // An attempt failed (outcome or loss); retries or fails the task.
  void AttemptFailed(TaskRef r, Reason why, bool counts_as_failure);
  // The lost (or unreported) attempt of `r` is gone: requeued as a lost
  // attempt with `reason`, failed after max_lost_attempts, or canceled.
  void LostAttemptEnded(TaskRef r, Reason why = why::WorkerLost());
  // The current attempt of `r` ended before it started (dropped from its
  // worker's queue: withdrawn, or fenced): back to the front of its class,
  // no failure counted.
  void NeverStarted(TaskRef r, Reason why);
  // Worker slot `w` takes nothing new until its next heartbeat or attach.
  void HoldRefusing(uint32_t w);
  Duration BackoffFor(TaskRef r) const;

  // --- lineage (lineage.cc) ---
  // A task's outputs live only on the worker that ran it (TaskOutcome::
  // outputs_on). When that worker is lost and stays lost past the lease
  // bound (lease_ttl + expiry_grace), a succeeded task whose outputs a
  // dependent still needs (waiting, queued or assigned: not yet started) runs
  // again, "rerun: outputs lost with worker N", and its dependents wait for
  // it once more. Invariants kept: a group's `unmet` counts its dependency
  // groups with a task not succeeded, so a rerun raises it again and the
  // dependents' queued tasks go back to waiting (Unready); Enqueue sends a
  // task whose group is unmet to waiting instead of its queue.
  // Worker slot `w` was just lost: arms a kOutputsLost timer for each
  // succeeded task whose outputs it holds, in jobs still running, and in
  // any job held for a task with replicas (its copies are kept).
  void NoteOutputsLost(uint32_t w);
  // The kOutputsLost timer of attempt `attempt` of `r`.
  void OutputsLostExpired(TaskRef r, uint32_t attempt);
  // The worker that holds r's outputs is lost past the lease bound (or r
  // has no outputs: false).
  bool HolderGone(TaskRef r) const;
  // The tasks that would receive r's files and have not started yet: of
  // groups depending on r's (not doomed), and of running jobs naming r in
  // --after.
  std::vector<TaskRef> AwaitingOutputsOf(TaskRef r) const;
  // AwaitingOutputsOf(r) is not empty.
  bool OutputsNeeded(TaskRef r) const;
  // Succeeded `r` runs again; so do the producers of its own inputs whose
  // holder is gone.
  void Rerun(TaskRef r);
  // Succeeded `r` lost its outputs but cannot rerun (its group is doomed):
  // every task still waiting for its files is canceled with `reason`.
  void CancelNeedersOf(TaskRef r, const Reason& why);
  // Queued `r` waits again (a dependency reruns): out of its queue, its
  // backoff, its quota list.
  void Unready(TaskRef r);
  // Queued `r` starts again (a retry, a refusal): the producers of its
  // inputs whose holder is gone rerun first.
  void RerunLostInputsOf(TaskRef r);

  // --- replicas (replicas.cc) ---
  // Copies of a succeeded task's outputs on further workers (`replicas` in
  // its spec). Its outcome lists the holders: outputs_on, then replicas,
  // each added when its worker reports a complete copy (journaled as the
  // outcome again). The outputs are lost only when every holder is.
  //
  // Asks workers that hold nothing of `r`'s outputs yet for the copies its
  // spec wants beyond those it has: the policy's order, live, not drained
  // or paused workers only; fewer (or none) when the pool has fewer.
  void Replicate(TaskRef r);
  Status OnOutputsReplicated(const OutputsReplicated& e);
  // Every worker that holds `o`'s outputs (outputs_on first).
  static std::vector<WorkerId> HoldersOf(const TaskOutcome& o);
  // Holder `w` of r's outputs is lost past the lease bound while another
  // holder lives: it is dropped from the outcome (journaled) and a new copy
  // is asked for.
  void DropHolder(TaskRef r, WorkerId w);
  // Holders of r's outputs lost past the lease bound.
  bool HolderLostPastBound(WorkerId w) const;

  // --- re-attach and adoption (adoption.cc) ---
  // A re-attach's report is the truth about its worker: every attempt the
  // core has on worker slot `w` that `e` lists neither as running nor as
  // finished is not there. One never sent (claim pending) is left to its
  // grant; any other goes back to its queue at once, its leases released:
  // as a lost attempt when it had started, else as never started.
  void TakeBackUnreported(uint32_t w, const WorkerAttached& e);
  // While settling: `worker` attached; ends the hold when it was the last.
  void SettleAttached(WorkerId worker);
  // Ends the placement hold and offers every class and worker again.
  void EndSettle();
  // A running attempt reported by the worker in slot `w` (WorkerAttached).
  void ReconcileRunning(uint32_t w, const ReportedAttempt& run);
  // Makes attempt `attempt` of the queued task `r`, which the journal never
  // saw, current on worker slot `w` (events.h, WorkerAttached). `run`: the
  // attempt still runs there with these resources (booked, leases claimed);
  // null: it already finished (nothing booked or claimed). False, and
  // nothing changed, when `run`'s resources are not free there.
  bool Adopt(TaskRef r, uint32_t w, uint32_t attempt, const ReportedAttempt* run);
  // Queue-ahead: makes the queued attempt `run` of `r`, which the journal
  // never saw, wait again behind the attempt on worker slot `w` that holds
  // its cores. False, and nothing changed, when there is no such attempt.
  bool AdoptQueued(TaskRef r, uint32_t w, const ReportedAttempt& run);
  // True when attempt `attempt` of `r` may be one the journal never saw.
  bool Adoptable(TaskRef r, uint32_t attempt) const;

  // --- leases and resources (leases.cc) ---
  uint32_t NewActive(TaskRef r, uint32_t worker_slot, uint32_t attempt);
  // Frees the active's resources (if booked) and its slot; marks the worker
  // dirty so the freed room is used at once.
  void EndActive(uint32_t a);
  LeaseKeys KeysOf(const Active& a) const;
  void EmitRelease(const Active& a);
  void RenewAll();
  void MarkWorkerDirty(uint32_t w);
  void MarkLoadDirty(uint32_t w);
  WorkerLoad LoadOf(uint32_t w) const;
  void FlushLoads();
  bool Schedulable(uint32_t w) const {
    return !workers[w].lost && !workers[w].drained && !workers[w].paused && !workers[w].refusing;
  }

  // --- placement (dispatch.cc) ---
  // Walks the live class heads in priority-then-FIFO order, parking those
  // over their user's quota. `visit(cls, r)` answers kNext, kRestart (it
  // changed the queues: walk again from the top) or kStop.
  enum class Walk { kNext, kRestart, kStop };
  template <typename Visit>
  void WalkHeads(Visit visit) {
  restart:
    for (const auto& key : queues.heads()) {
      const uint32_t cls = TaskQueues::ClassOfKey(key);
      TaskRef r;
      const TaskRef head = queues.Head(cls).task;
      if (!LiveHead(cls, r) || !(r == head)) goto restart;  // popped dead entries
      if (!QuotaAllows(r)) {
        Park(cls, r);
        goto restart;
      }
      switch (visit(cls, r)) {
        case Walk::kNext:
          continue;
        case Walk::kRestart:
          goto restart;
        case Walk::kStop:
          return;
      }
    }
  }
  void Dispatch();
  void PlaceClass(uint32_t cls);
  void PlaceOnWorker(uint32_t w);
  // Pops dead heads; false when the class is empty.
  bool LiveHead(uint32_t cls, TaskRef& out);
  bool QuotaAllows(TaskRef r) const;
  void Park(uint32_t cls, TaskRef r);
  void Unpark(uint32_t user);
  // --- fair share (fair_share.cc) ---
  // User u's Active slot starts (hold) or stops holding `req`: the user's
  // use is charged up to now. (Inline: twice per attempt, in B1's path.)
  void HoldUse(uint32_t u, const ResourceRequest& req, bool hold) {
    if (u >= fair_share.user_count()) SyncFairShareUsers();
    if (hold) {
      fair_share.Hold(u, req, now_us);
    } else {
      fair_share.Release(u, req, now_us);
    }
  }
  // Every user's standing as of now, into the queues' order.
  void UpdateStandings();
  void SyncFairShareUsers();
  // Restore: rebuilds use from the task records (fair_share.h, "Restarts").
  // ReplayUse reads `record` before it changes task r: an assignment or
  // start notes since when the attempt holds, its end charges the span
  // (AddPast). FinishReplayUse charges the attempts still held up to now
  // and sets the standings.
  void ReplayUse(TaskRef r, const TaskRecord& record);
  void FinishReplayUse();
  // --- quotas (quotas.cc) ---
  // A new user's account: its quota and its groups from config.users.
  UserAccount AccountFor(const std::string& name);
  // After `user` gave room back: Unpark it and the other members of its
  // limited groups that have parked tasks.
  void UnparkFreed(uint32_t user);
  // UserPolicyChanged: the new limits and groups, each account's use kept.
  void ApplyUserPolicy(const UserPolicy& policy);
  // Each user's queued tasks counted again from the jobs (after a restore).
  void RecountQueued();
  bool CanPlace(uint32_t w, TaskRef r);
  // Worker w stays long enough for r started at `from_us`: it has no end
  // (WorkerResources::ends_at), or r has a timeout that ends by then.
  bool LastsFor(uint32_t w, TaskRef r, int64_t from_us) const;
  // A worker with an end takes nothing to start later (queue-ahead): when
  // the task before it ends is not known well enough.
  bool Ending(uint32_t w) const { return workers[w].ending; }
  // r could run on w some time: its resources fit w's offer and w stays
  // long enough if r started now.
  bool CanEverRun(uint32_t w, TaskRef r) const {
    return workers[w].res->CanEverFit(RequestOf(r)) &&
           (!workers[w].ending || LastsFor(w, r, now_us));
  }
  // Books `r` on worker `w` for a moment and answers `check()` then (false
  // when it does not fit); nothing stays booked.
  template <typename Check>
  bool AfterPlacing(uint32_t w, TaskRef r, Check check) {
    WorkerState& res = *workers[w].res;
    Allocation trial;
    if (!res.Allocate(RequestOf(r), policy->PreferFullGpus(), trial)) return false;
    const bool ok = check();
    res.Free(RequestOf(r), trial);
    return ok;
  }
  // Places `r` of class `cls` on `w`; `head`: r is the class head (popped),
  // else its entry stays in the queue (TaskFlag::kStaleEntry).
  void Place(uint32_t cls, TaskRef r, uint32_t w, bool head = true);
  void MarkClassDirty(uint32_t cls);

  // --- reservation and backfill (reservation.cc) ---
  // Placing `r` on the reserved worker `w` leaves the reserved task what it
  // needs (see reservation.h).
  bool ReservationAllows(uint32_t w, TaskRef r);
  // The latest time the request fits on worker w if every task there ends
  // by its time limit: now when it fits now, kNever when it needs room a
  // task without a limit holds (see Reservation::shadow_us).
  int64_t FitTime(uint32_t w, const ResourceRequest& req) const;
  // The reservation's FitTime, cached.
  int64_t ReservationShadow();
  // The worker's tasks changed: its FitTime may have.
  void WorkerTasksChanged(uint32_t w) {
    if (reservation.worker == w) reservation.shadow_valid = false;
  }
  void Reserve(TaskRef r, uint32_t hint_worker);
  // Ends the reservation and offers its worker again: tasks held back there
  // fit nowhere else, and no free on that worker may follow to retry them.
  void EndReservation();
  // On the reserved worker `w`: places queued tasks behind their class
  // heads whose time limit ends by the reservation's planned start.
  void BackfillBehindHeads(uint32_t w);
  // A worker that leaves (Ending) takes queued tasks from behind class
  // heads that cannot end there in time (a head without a timeout does
  // not hold its class back on it).
  void FillLeavingWorker(uint32_t w);
  // Places on w the queued tasks behind the class heads (kBackfillScan deep
  // per class, not in class `skip`) that `pick` accepts and that fit.
  void PlaceBehindHeads(uint32_t w, uint32_t skip, const std::function<bool(TaskRef)>& pick);

  // --- queue-ahead (queue_ahead.cc) ---
  void NoteTail(uint32_t w);
  // Books the first class head that could ever run on `w` behind a task
  // there whose resources cover it, as long as there are such tasks; the
  // head that cannot go behind one stops it (nothing overtakes it on w).
  // False when `w` has no task left that something could wait behind.
  bool QueueAhead(uint32_t w);
  // QueueAhead on the listed workers, until a pass books nothing.
  void QueueAheadAnywhere();
  // The attempt `act` waits behind: its task and attempt number; attempt 0
  // when it waits behind none.
  std::pair<TaskId, uint32_t> WaitsBehind(const Active& act) const {
    if (act.prev == kNone) return {TaskId{}, 0};
    return {IdOf(actives[act.prev].task), actives[act.prev].attempt};
  }
  // The Active on `w` that `req` may wait behind (kNone: none).
  uint32_t FindTail(uint32_t w, const ResourceRequest& req) const;
  bool HasTail(uint32_t w) const;
  // Assigns class head `r` behind Active `prev` (popped from its class).
  void PlaceBehind(uint32_t cls, TaskRef r, uint32_t prev);
  // Links Active `a` behind Active `prev` on their worker and lists it
  // among the waiters; `seq`: its queue entry's (Active::wait_seq).
  void LinkBehind(uint32_t a, uint32_t prev, uint64_t seq);
  void UnlistWaiter(const Active& act) {
    queue_ahead.RemoveWaiter(SpecOf(act.task).priority, act.wait_seq, act.task, act.attempt);
  }
  // Queue-ahead take-back, on a worker `w` whose room just freed: the first
  // waiter (behind a task on any worker) that fits here and goes before
  // every class head that does is withdrawn from where it waits, and this
  // room is held for it until its worker answers. Without that, a task
  // queued behind a long one would wait for it while other workers free.
  void TakeBack(uint32_t w);
  // Queue-ahead never overtakes priority: a head `r` that fits no free
  // room and finds no free place in any worker's queue takes the place of a
  // waiter of lower priority (the lowest first, among the last
  // kTakeBackScan waiters) whose predecessor's cores and memory would cover
  // it. That waiter is withdrawn; once its worker answers, its predecessor
  // is a tail again and QueueAhead, walking heads in priority order, puts
  // `r` there. A waiter whose predecessor ends before the withdrawal
  // arrives still starts (it had the room first).
  void Displace(TaskRef r);
  // Takes waiter `r` back from its worker: at once when its assignment was
  // not sent yet (back to its queue), else by a withdrawal (TaskFlag::kWithdraw),
  // holding the room of `hold` (kNone: none) for it until the answer.
  void Withdraw(TaskRef r, const Reason& why, uint32_t hold);
  // Waiter `t` (assigned, behind another) may be taken back: not lost,
  // neither restored nor adopted, not already being withdrawn, canceled or
  // preempted.
  bool Movable(const Task& t) const;
  // The task the room of `w` is held for, if the hold is still current.
  const TaskRef* HeldFor(uint32_t w);
  // Ends the hold for `r` (its withdrawal was answered) and offers the
  // worker again.
  void DropHold(TaskRef r);
  // Placing `r` on `w` leaves room for the task `w` is held for.
  bool HoldAllows(uint32_t w, TaskRef r);

  // --- preemption by priority (preemption.cc, preemption.h) ---
  // Victims for `r` on one worker, by the rules of preemption.h; worker
  // kNone when no worker has a set that makes room. `ignore_cooldown`: as
  // if no task were in its cool-down; `cooldown_until` is then the latest
  // cool-down end among the victims chosen (0 when none is cooling down).
  struct VictimChoice {
    uint32_t worker = kNone;
    std::vector<uint32_t> actives;  // in task id order
    int64_t cooldown_until = 0;
  };
  VictimChoice ChooseVictims(TaskRef r, bool ignore_cooldown) const;
  // `r` heads its class and no worker can place it now: it preempts if
  // preemption is on and it may. True when a preemption for it is in
  // flight (begun now or before).
  bool Preempt(TaskRef r);
  // On Tick: every class head of at least preempt_priority that no worker
  // can place now preempts if it may (cool-downs end, victims appear).
  void PreemptBlockedHeads();
  // Placing `r` on `w` leaves the preemptor `w` is held for room once its
  // victims have ended.
  bool PreemptionAllows(uint32_t w, TaskRef r);
  // Attempt `attempt` of the victim `r` ended (EndActive).
  void VictimEnded(TaskRef r, uint32_t attempt);
  // Ends the preemption in flight for `preemptor` (if any) and offers its
  // worker again.
  void EndPreemption(TaskRef preemptor);
  // Worker slot `w` left placement: the preemption held there ends.
  void DropPreemptionOn(uint32_t w);
  // After `w` was offered to the heads: a preemption there whose victims
  // have all ended is over (its preemptor took the room, or could not).
  void SettlePreemption(uint32_t w);
  // "preempted by 14.2 (priority 90)": why the victim `r` went back.
  Reason PreemptedReason(TaskRef r) const;
};

}  // namespace drover::core

#endif  // DROVER_CORE_SCHEDULER_STATE_H_
