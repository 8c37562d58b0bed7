// Attempt events: a task attempt starts, finishes, is refused, its leases
// are granted, rejected or freed; how an attempt that failed or never
// started goes back; every task state change (Transition) and the past
// attempts it keeps.
#include <algorithm>

#include "common/quantity.h"
#include "core/attempt_events_ops.h"
#include "core/checkpoints_ops.h"
#include "core/input_select.h"
#include "core/job_lifecycle_ops.h"
#include "core/leases_ops.h"
#include "core/lineage_ops.h"
#include "core/locality_ops.h"
#include "core/lookup_ops.h"
#include "core/preemption_ops.h"
#include "core/quarantine_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/replicas_ops.h"
#include "core/reservation_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"
#include "core/worker_events_ops.h"

namespace drover::core {

namespace {

Status Stale(const char* what, TaskId id, uint32_t attempt) {
  return FailedPrecondition(std::string(what) + " for " + id.ToString() + "#" +
                            std::to_string(attempt) + " which is not current");
}

}  // namespace

Status OnStarted(State& s, const TaskStarted& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if (t.state != TaskState::kAssigned || s.actives[t.active].attempt != e.attempt ||
      (e.worker != 0 && e.worker != t.worker)) {
    return Stale("started", e.task, e.attempt);
  }
  Active& act = s.actives[t.active];
  if (act.lost && act.worker != kNone && s.workers[act.worker].lost) {
    return Stale("started from a lost worker", e.task, e.attempt);
  }
  act.granted = true;  // a restored task reporting in holds its lease
  if (t.flags.Has(TaskFlag::kWithdraw)) {
    // Its predecessor ended before the withdrawal arrived: it runs here.
    t.flags.Clear(TaskFlag::kWithdraw);
    DropHold(s, r);
  }
  t.started_us = s.now_us;
  if (act.worker != kNone) {
    WorkerTasksChanged(s, act.worker);  // its limit counts from now
    NoteAttemptStart(s, act.worker, r);
  }
  Transition(s, r, TaskState::kRunning);
  const Duration timeout = s.SpecOf(r).timeout;
  if (timeout > Duration::zero()) {
    PushTimer(s, s.now_us + timeout.count(), TimerKind::kTimeout, r, e.attempt);
  }
  return Status::Ok();
}

Duration BackoffFor(const State& s, TaskRef r) {
  Duration d = s.SpecOf(r).retry_backoff;
  for (uint32_t i = 1; i < s.task(r).failures && d < s.config.max_retry_backoff; ++i) d *= 2;
  return std::min(d, s.config.max_retry_backoff);
}

void AttemptFailed(State& s, TaskRef r, Reason why, bool counts_as_failure) {
  Task& t = s.task(r);
  if (counts_as_failure) ++t.failures;
  const uint32_t retries = s.SpecOf(r).retries;
  if (counts_as_failure && t.failures > retries) {
    Transition(s, r, TaskState::kFailed, std::move(why));
    return;
  }
  if (!counts_as_failure) {
    Transition(s, r, TaskState::kQueued, std::move(why));
    Enqueue(s, r, true);
    return;
  }
  const Duration backoff = BackoffFor(s, r);
  t.flags.Set(TaskFlag::kBackoff);
  Transition(s, r, TaskState::kQueued,
             why::WithRetry(std::move(why), t.failures, retries, backoff));
  PushTimer(s, s.now_us + backoff.count(), TimerKind::kRetry, r, t.attempt);
}

void NeverStarted(State& s, TaskRef r, Reason why) {
  Task& t = s.task(r);
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  DropHold(s, r);
  Transition(s, r, TaskState::kQueued, std::move(why));
  Enqueue(s, r, true);
}

namespace {

// The outcome equals a default TaskOutcome: exit 0, nothing measured, no
// result. Such an outcome is neither journaled nor kept.
bool IsPlainSuccess(const TaskOutcome& o) {
  return o.exit_code == 0 && o.signal == 0 && !o.oom_killed && o.usage == TaskUsage{} &&
         o.result.empty() && o.reason.empty() && o.outputs.empty();
}

}  // namespace

Status OnFinished(State& s, TaskFinished& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if ((t.state != TaskState::kAssigned && t.state != TaskState::kRunning) ||
      s.actives[t.active].attempt != e.attempt || (e.worker != 0 && e.worker != t.worker)) {
    return Stale("finished", e.task, e.attempt);
  }
  TaskOutcome& o = e.outcome;
  if (o.result.size() > kMaxResultBytes) o.result.resize(kMaxResultBytes);
  // Only the core says a result came from the cache.
  o.cached_from = TaskId();
  o.cached_ended = Time();
  o.cached_ran = Duration::zero();
  o.uncached = false;
  // Outputs count only from a success, and are held where it ran.
  const bool succeeded = o.exit_code == 0 && o.signal == 0 && !o.oom_killed && o.reason.empty();
  if (!succeeded) o.outputs.clear();
  o.outputs_on = o.outputs.empty() ? 0 : t.worker;
  const uint32_t a = t.active;
  const uint32_t on = s.actives[a].worker;  // its slot, for the quarantine's evidence
  // Released even when restored assigned (granted unknown): a worker that
  // reports the end had the assignment, so the claim was granted, and a
  // release is compare-and-delete by owner, harmless where nothing is held.
  EmitRelease(s, s.actives[a]);
  const uint64_t limit = s.actives[a].alloc.mem_bytes;
  EndActive(s, a);
  if (e.never_started && !t.flags.Has(TaskFlag::kCancel)) {
    // Dropped from its worker's queue before it started: it never ran.
    // The worker's reason (a worker before 2026-12 sent it as the result).
    NeverStarted(s, r, why::DroppedBeforeStart(!o.reason.empty() ? o.reason : o.result));
    return Status::Ok();
  }
  t.finished_us = s.now_us;
  t.lost = 0;
  static const TaskOutcome kEmpty;
  const bool plain = IsPlainSuccess(o);
  if (!plain) {
    s.out->push_back(Persist{OutcomeRecord{e.task, e.attempt, o, TimeFromMicros(s.now_us)}});
    Extra& extra = s.extras[ExtraKey(r)];
    extra.outcome = std::move(o);
    extra.outcome_attempt = e.attempt;
    s.jobs[r.job].changed_us = s.now_us;
  } else if (!s.extras.empty()) {
    auto it = s.extras.find(ExtraKey(r));
    if (it != s.extras.end()) it->second.outcome.reset();
  }
  const TaskOutcome& got = plain ? kEmpty : *s.extras[ExtraKey(r)].outcome;
  const TaskFlags flags = t.flags;
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  if (flags.Has(TaskFlag::kWithdraw)) DropHold(s, r);
  if (flags.Has(TaskFlag::kCancel)) {
    Transition(s, r, TaskState::kCanceled, CancelReasonOf(s, r));
    return Status::Ok();
  }
  if (flags.Has(TaskFlag::kPreempted) &&
      (e.vacated || got.exit_code != 0 || got.signal != 0 || got.oom_killed)) {
    // Stopped for a task of higher priority (vacated, or killed by a worker
    // that does not vacate): not its failure. One that ended well before
    // the stop reached it succeeded.
    AttemptFailed(s, r, PreemptedReason(s, r), false);
    return Status::Ok();
  }
  if (e.vacated) {
    // Its worker took the room back (the owner returned): not the task's
    // failure, and the worker's reason says so.
    AttemptFailed(s, r, why::Vacated(got.reason), false);
    return Status::Ok();
  }
  if (flags.Has(TaskFlag::kResized)) {
    // Stopped because its worker's new offer lacks its resources: not the
    // task's failure.
    AttemptFailed(s, r, why::Resized(e.worker ? e.worker : t.worker, /*ran=*/true), false);
    return Status::Ok();
  }
  Reason why = flags.Has(TaskFlag::kTimedOut)    ? why::TimedOut(s.SpecOf(r).timeout)
               : flags.Has(TaskFlag::kLeaseLost) ? why::LeaseExpiredWhileRunning()
                                                 : why::Failed(got, limit);
  if (why.empty()) {
    NoteAttemptEnd(s, on, r, /*failure=*/false);
    Transition(s, r, TaskState::kSucceeded);
    NoteCacheable(s, r);
    if (!got.outputs.empty() && s.SpecOf(r).replicas > 1) Replicate(s, r);
  } else {
    // On a black hole (quarantined now, by this attempt or before) it uses
    // no retry: the machine failed it.
    const bool black_hole = NoteAttemptEnd(s, on, r, /*failure=*/true);
    AttemptFailed(s, r, std::move(why), !black_hole);
  }
  return Status::Ok();
}

Status OnRefused(State& s, const TaskRefused& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if (t.state != TaskState::kAssigned || s.actives[t.active].attempt != e.attempt ||
      (e.worker != 0 && e.worker != t.worker)) {
    return Stale("refused", e.task, e.attempt);
  }
  const uint32_t w = s.actives[t.active].worker;
  EmitRelease(s, s.actives[t.active]);
  EndActive(s, t.active);
  if (w != kNone && !s.workers[w].lost) HoldRefusing(s, w);
  if (t.flags.Has(TaskFlag::kCancel)) {
    t.flags.KeepOnly(TaskFlag::kStaleEntry);
    DropHold(s, r);
    Transition(s, r, TaskState::kCanceled, CancelReasonOf(s, r));
    return Status::Ok();
  }
  // Only the producers of its own inputs: a worker cannot make any other
  // task run again by naming it.
  std::vector<std::pair<TaskId, WorkerId>> corrupt;
  if (!e.corrupt.empty()) {
    ForEachInput(s, r, [&](TaskId from, const TaskOutcome&, const std::string*) {
      for (const auto& claim : e.corrupt) {
        if (claim.first == from) corrupt.push_back(claim);
      }
    });
  }
  NeverStarted(s, r, why::RefusedBy(t.worker, e.reason));
  for (const auto& [producer, holder] : corrupt) NoteCorruptCopy(s, producer, holder);
  return Status::Ok();
}

void HoldRefusing(State& s, uint32_t w) {
  s.workers[w].refusing = true;
  SyncPolicy(s, w);
}

Status OnGranted(State& s, const LeaseGranted& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if (t.state == TaskState::kRunning && s.actives[t.active].attempt == e.attempt &&
      !s.actives[t.active].granted && s.actives[t.active].worker != kNone) {
    s.actives[t.active].granted = true;  // an adopted attempt: it runs already
    return Status::Ok();
  }
  if (t.state != TaskState::kAssigned || s.actives[t.active].attempt != e.attempt ||
      s.actives[t.active].granted || s.actives[t.active].worker == kNone) {
    return Stale("lease granted", e.task, e.attempt);
  }
  Active& act = s.actives[t.active];
  act.granted = true;
  if (act.lost) return Status::Ok();  // the worker is gone; wait for expiry
  const TaskGroupSpec& spec = s.SpecOf(r);
  const Job& job = s.jobs[r.job];
  // Still waiting behind another: the worker starts it as that one exits.
  const auto [after, after_attempt] = WaitsBehind(s, act);
  std::shared_ptr<std::vector<DependencyInput>> inputs;
  ForEachInput(s, r, [&](TaskId from, const TaskOutcome& o, const std::string* group) {
    // Only what its `inputs` select (all without them, and from --after).
    std::vector<OutputFile> files = group ? SelectOutputs(spec, *group, o.outputs) : o.outputs;
    if (o.result.empty() && files.empty()) return;
    if (!inputs) inputs = std::make_shared<std::vector<DependencyInput>>();
    const WorkerId on = files.empty() ? 0 : o.outputs_on;
    inputs->push_back(DependencyInput{from, o.result, std::move(files), on,
                                      on == 0 ? std::vector<WorkerId>{} : o.replicas});
  });
  s.out->emplace_back(std::in_place_type<AssignTask>, e.task, e.attempt, s.workers[act.worker].id,
                      act.alloc.cores, act.alloc.mem_bytes, act.alloc.gpus,
                      spec.IndexAt(r.index - job.groups[t.group].first), job.spec.get(), after,
                      after_attempt, t.group, std::move(inputs));
  std::get<AssignTask>(s.out->back()).checkpoint = CheckpointOf(s, r);
  if (s.config.start_timeout > Duration::zero()) {
    PushTimer(s, s.now_us + StartBoundOf(s, r).count(), TimerKind::kStartDeadline, r, e.attempt);
  }
  return Status::Ok();
}

Duration StartBoundOf(const State& s, TaskRef r) {
  uint64_t input_bytes = 0;
  ForEachInput(s, r, [&](TaskId, const TaskOutcome& o, const std::string* group) {
    input_bytes += InputBytes(s, r, o, group);
  });
  if (input_bytes == 0 || s.config.input_fetch_rate == 0) return s.config.start_timeout;
  // Whole seconds, so that the reason reads "within 50s".
  const int64_t fetch_s = static_cast<int64_t>((input_bytes + s.config.input_fetch_rate - 1) /
                                               s.config.input_fetch_rate);
  return s.config.start_timeout + Seconds(fetch_s);
}

Status OnRejected(State& s, const LeaseRejected& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if (t.state == TaskState::kRunning && s.actives[t.active].attempt == e.attempt &&
      !s.actives[t.active].granted && s.actives[t.active].worker != kNone) {
    // An adopted attempt whose keys someone else holds: it may not run on.
    // Its end comes back as TaskFinished and is retried as a lost lease.
    if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut)) {
      t.flags.Set(TaskFlag::kLeaseLost);
      s.out->push_back(
          KillTask{e.task, e.attempt, t.worker, why::LeaseRejected(/*ran=*/true), true});
    }
    return Status::Ok();
  }
  if (t.state != TaskState::kAssigned || s.actives[t.active].attempt != e.attempt ||
      s.actives[t.active].granted) {
    return Stale("lease rejected", e.task, e.attempt);
  }
  EndActive(s, t.active);
  Transition(s, r, TaskState::kQueued, why::LeaseRejected(/*ran=*/false));
  Enqueue(s, r, true);
  return Status::Ok();
}

void LostAttemptEnded(State& s, TaskRef r, Reason why) {
  Task& t = s.task(r);
  EndActive(s, t.active);
  if (t.flags.Has(TaskFlag::kWithdraw)) DropHold(s, r);
  if (t.flags.Has(TaskFlag::kCancel)) {
    t.flags.KeepOnly(TaskFlag::kStaleEntry);
    Transition(s, r, TaskState::kCanceled, CancelReasonOf(s, r));
    return;
  }
  const bool preempted = t.flags.Has(TaskFlag::kPreempted);
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  if (preempted) {
    // It was being stopped for a task of higher priority anyway: gone
    // with its worker, it is not the worker's loss either.
    AttemptFailed(s, r, PreemptedReason(s, r), false);
    return;
  }
  ++t.lost;
  if (t.lost >= s.config.max_lost_attempts) {
    Transition(s, r, TaskState::kFailed, why::WorkerLostTooOften(t.lost));
    return;
  }
  AttemptFailed(s, r, std::move(why), false);
}

Status OnFreed(State& s, const LeaseFreed& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  Task& t = s.task(r);
  if ((t.state != TaskState::kAssigned && t.state != TaskState::kRunning) ||
      s.actives[t.active].attempt != e.attempt) {
    return Status::Ok();  // our own release, or an attempt already ended
  }
  Active& act = s.actives[t.active];
  if (act.lost) {
    LostAttemptEnded(s, r);
    return Status::Ok();
  }
  if (!act.granted) return Status::Ok();  // a key vanished before the grant: the grant decides
  // The lease vanished under a live task: it may no longer run safely.
  if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut)) {
    t.flags.Set(TaskFlag::kLeaseLost);
    s.out->push_back(
        KillTask{e.task, e.attempt, s.workers[act.worker].id, why::LeaseExpired(), true});
  }
  return Status::Ok();
}

void Transition(State& s, TaskRef r, TaskState to, Reason why) {
  Job& job = s.jobs[r.job];
  Task& t = job.tasks[r.index];
  TaskState from = t.state;
  const bool attempt_ended = to == TaskState::kQueued && t.attempt > 0 &&
                             (from == TaskState::kAssigned || from == TaskState::kRunning);
  // A preemptor that leaves its queue (placed, canceled) needs its room no
  // longer.
  if (from == TaskState::kQueued && to != from && !s.preemption.in_flight.empty()) {
    EndPreemption(s, r);
  }
  if (attempt_ended) NotePastAttempt(s, r, from, s.now_us, why);
  // When it left its attempt, its success became history (a rerun,
  // lineage.cc) or it ended, as Restore reads it from the record.
  if (attempt_ended || from == TaskState::kSucceeded || IsTerminal(to)) t.finished_us = s.now_us;
  job.changed_us = s.now_us;
  --job.counts[static_cast<int>(from)];
  ++job.counts[static_cast<int>(to)];
  // Queued for the user's max_queued: waiting or queued (not yet assigned).
  if ((from <= TaskState::kQueued) != (to <= TaskState::kQueued)) {
    s.users[job.user].account.AddQueued(to <= TaskState::kQueued ? 1 : -1);
  }
  t.state = to;
  if (!why.empty()) {
    Extra& extra = s.extras[ExtraKey(r)];
    extra.reason = why.text;
    extra.reason_kind = why.kind;
  } else if (to == TaskState::kSucceeded && !s.extras.empty()) {
    auto it = s.extras.find(ExtraKey(r));
    if (it != s.extras.end()) {
      it->second.reason.clear();
      it->second.reason_kind = EndKind::kNone;
    }
  }
  const TaskId id{job.id, r.index};
  // Both commands are built in place from their fields: a command emplaced
  // with no arguments is value-initialised, i.e. zero-filled first, and that
  // was most of this function's cost.
  {
    TaskStateChanged& changed = std::get<TaskStateChanged>(s.out->emplace_back(
        std::in_place_type<TaskStateChanged>, id, from, to, uint32_t{t.attempt}));
    if (!why.empty()) {
      changed.reason = why.text;
      changed.kind = why.kind;
    }
  }
  // Every field is given: one left out (the vectors) is value-initialised,
  // which zero-fills the whole record first.
  std::vector<uint32_t> cores;
  std::vector<GpuGrant> gpus;
  std::pair<TaskId, uint32_t> after;  // queue-ahead: the attempt it waits behind
  if (to == TaskState::kAssigned && t.active != kNone) {
    const Active& act = s.actives[t.active];
    cores.assign(act.alloc.cores.begin(), act.alloc.cores.end());
    if (!act.alloc.gpus.empty()) gpus.assign(act.alloc.gpus.begin(), act.alloc.gpus.end());
    after = WaitsBehind(s, act);
  } else if (IsTerminal(to)) {
    // What it ran on, so a restored server still shows it (Restore).
    if (const RanOn::Entry* ran = s.ran_on.Get(t.ran_on)) {
      cores = ran->cores;
      gpus = ran->gpus;
    }
  }
  const Time started = (to == TaskState::kQueued || IsTerminal(to)) && t.started_us != 0
                           ? TimeFromMicros(t.started_us)
                           : Time();
  s.out->emplace_back(std::in_place_type<Persist>, std::in_place_type<TaskRecord>, id, to,
                      uint32_t{t.attempt}, t.worker, TimeFromMicros(s.now_us), std::move(why.text),
                      uint32_t{t.failures}, std::move(cores), std::move(gpus), after.first,
                      after.second, started, why.kind);
  if (to == TaskState::kSucceeded) {
    OnSucceeded(s, r);
  } else if (to == TaskState::kFailed || to == TaskState::kCanceled) {
    OnEndedBadly(s, r, why::DependencyEnded(id, to));
  }
}

void NotePastAttempt(State& s, TaskRef r, TaskState from, int64_t at_us, const Reason& why) {
  const Task& t = s.task(r);
  PastAttempt p;
  p.attempt = t.attempt;
  p.worker = t.worker;
  if (from == TaskState::kRunning) p.started_at = TimeFromMicros(t.started_us);
  p.ended_at = TimeFromMicros(at_us);
  p.reason = why.text;
  p.kind = why.kind;
  if (auto e = s.extras.find(ExtraKey(r));
      e != s.extras.end() && e->second.outcome && e->second.outcome_attempt == t.attempt) {
    p.outcome = e->second.outcome;
  }
  std::vector<PastAttempt>& kept = s.past[ExtraKey(r)];
  if (kept.size() >= Scheduler::kMaxPastAttempts) kept.erase(kept.begin());
  kept.push_back(std::move(p));
}

}  // namespace drover::core
