// Re-attach and adoption after a restart (adoption.h): a worker's report
// reconciled with what the core has there, attempts the journal never saw
// adopted, and the placement hold that waits for the workers to report.
#include <algorithm>
#include <set>

#include "core/adoption_ops.h"
#include "core/attempt_events_ops.h"
#include "core/dispatch_ops.h"
#include "core/leases_ops.h"
#include "core/lookup_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"

namespace drover::core {

void SettleAttached(State& s, WorkerId worker) {
  if (s.adoption.Attached(worker)) EndSettle(s);
}

void EndSettle(State& s) {
  s.adoption.StopSettling();
  for (uint32_t cls = 0; cls < s.queues.class_count(); ++cls) MarkClassDirty(s, cls);
  for (uint32_t w = 0; w < s.workers.size(); ++w) {
    if (Schedulable(s, w)) MarkWorkerDirty(s, w);
  }
}

void TakeBackUnreported(State& s, uint32_t w, const WorkerAttached& e) {
  std::set<std::pair<TaskId, uint32_t>> held;
  for (const ReportedAttempt& run : e.running) held.emplace(run.task, run.attempt);
  for (const TaskFinished& f : e.finished) held.emplace(f.task, f.attempt);
  std::vector<uint32_t> gone;
  for (uint32_t a : s.workers[w].actives) {
    const Active& act = s.actives[a];
    // A claim still pending was never sent: its grant sends it on the new
    // connection. A lost (or restored) attempt's claim was made before.
    if (!act.granted && !act.lost) continue;
    if (!held.count({s.IdOf(act.task), act.attempt})) gone.push_back(a);
  }
  // Waiters before the attempts they wait behind: ending a predecessor
  // first would hand its resources to a waiter that is gone too.
  std::stable_partition(gone.begin(), gone.end(),
                        [&](uint32_t a) { return s.actives[a].prev != kNone; });
  for (uint32_t a : gone) {
    const TaskRef r = s.actives[a].task;
    Task& t = s.task(r);
    if (t.active != a) continue;
    const bool started = t.state == TaskState::kRunning;
    EmitRelease(s, s.actives[a]);
    if (started) {
      LostAttemptEnded(s, r, why::ReattachedWithout(s.workers[w].id, /*ran=*/true));
      continue;
    }
    EndActive(s, a);
    if (t.flags.Has(TaskFlag::kCancel)) {
      t.flags.KeepOnly(TaskFlag::kStaleEntry);
      DropHold(s, r);
      Transition(s, r, TaskState::kCanceled, CancelReasonOf(s, r));
      continue;
    }
    NeverStarted(s, r, why::ReattachedWithout(s.workers[w].id, /*ran=*/false));
  }
}

bool Adoptable(const State& s, TaskRef r, uint32_t attempt) {
  // Every attempt the journal saw is <= the task's attempt; a higher one was
  // assigned by a server that crashed before its record was durable, and
  // only to a worker that was active then, reporting on its first attach.
  const Task& t = s.task(r);
  return s.adoption.adopting && t.state == TaskState::kQueued && t.active == kNone &&
         attempt > t.attempt && attempt <= UINT16_MAX;
}

void ReconcileRunning(State& s, uint32_t w, const ReportedAttempt& run) {
  const WorkerId id = s.workers[w].id;
  auto kill = [&](why::Fence fence) {
    s.out->push_back(KillTask{run.task, run.attempt, id, why::Fenced(fence), true});
  };
  Result<TaskRef> found = s.Find(run.task);
  if (!found.ok()) return kill(why::Fence::kUnknownTask);
  const TaskRef r = *found;
  Task& t = s.task(r);
  if (t.active != kNone && s.actives[t.active].attempt == run.attempt && t.worker == id) {
    Active& act = s.actives[t.active];
    if (act.worker != w) return kill(why::Fence::kNotCurrent);  // not re-booked (defensive)
    // Its worker has it: renew its leases again (a restored or lost attempt
    // would otherwise be requeued at its lease expiry while it runs).
    act.lost = false;
    if (t.state == TaskState::kAssigned && !run.queued) {
      (void)OnStarted(s, TaskStarted{run.task, run.attempt, id});
    }
    // A queued one was sent, so its claim was granted: renew it from now on.
    if (run.queued) act.granted = true;
    if (run.queued && t.flags.Has(TaskFlag::kWithdraw)) {
      // The withdrawal may have been lost with the connection: again.
      s.out->push_back(KillTask{run.task, run.attempt, id, why::RoomFreedElsewhere(),
                                /*hard=*/false, /*only_queued=*/true});
    }
    return;
  }
  if (run.queued) {
    // Waiting behind another attempt, and the journal never saw it: it goes
    // back behind that one, or (no such place) it is dropped, which costs
    // nothing since it never started.
    if (Adoptable(s, r, run.attempt) && AdoptQueued(s, r, w, run)) return;
    kill(why::Fence::kQueuedNotCurrent);
  } else if (Adoptable(s, r, run.attempt) && s.workers[w].res->CanEverFit(s.RequestOf(r))) {
    if (Adopt(s, r, w, run.attempt, &run)) return;
    kill(why::Fence::kResourcesTaken);
  } else {
    kill(why::Fence::kNotCurrent);
  }
  // The killed attempt's number is used up: the task's next attempt gets a
  // higher one, so the killed one's end (reported by this same worker) can
  // never pass for the new attempt's.
  if (t.active == kNone && run.attempt > t.attempt && run.attempt <= UINT16_MAX) {
    t.attempt = static_cast<uint16_t>(run.attempt);
  }
}

bool Adopt(State& s, TaskRef r, uint32_t w, uint32_t attempt, const ReportedAttempt* run) {
  Task& t = s.task(r);
  const ResourceRequest& req = s.RequestOf(r);
  // A task this worker could never run was never given to it.
  if (!s.workers[w].res->CanEverFit(req)) return false;
  Allocation alloc;
  if (run != nullptr) {
    // Exactly the shape placement gives the request, and free here.
    int64_t shares = 0;
    for (const GpuGrant& g : run->gpus) shares += g.share;
    const size_t want_cores = static_cast<size_t>((req.cpus_milli + 999) / 1000);
    if (run->cores.size() != want_cores || shares != req.gpus) return false;
    alloc.cores.assign(run->cores.begin(), run->cores.end());
    alloc.gpus.assign(run->gpus.begin(), run->gpus.end());
    alloc.mem_bytes = req.mem_bytes;
    if (!s.workers[w].res->AllocateExact(req, alloc)) return false;
  }
  if (s.reservation.IsFor(r)) EndReservation(s);
  t.flags = {};  // queue, backoff and parked entries of the queued task go stale
  t.attempt = static_cast<uint16_t>(attempt);
  t.worker = s.workers[w].id;
  const uint32_t a = NewActive(s, r, w, attempt);
  Active& act = s.actives[a];
  act.alloc = std::move(alloc);
  if (run != nullptr) {
    act.booked = true;
    s.out->emplace_back(std::in_place_type<ClaimLeases>, s.IdOf(r), attempt, s.workers[w].id,
                        KeysOf(s, act), s.config.lease_ttl);
  } else {
    act.lost = true;  // ended already: nothing held, nothing to release
  }
  Transition(s, r, TaskState::kAssigned);
  t.started_us = s.now_us;
  WorkerTasksChanged(s, w);  // its time limit counts from now
  Transition(s, r, TaskState::kRunning);
  const Duration timeout = s.SpecOf(r).timeout;
  if (run != nullptr && timeout > Duration::zero()) {
    PushTimer(s, s.now_us + timeout.count(), TimerKind::kTimeout, r, attempt);
  }
  return true;
}

bool AdoptQueued(State& s, TaskRef r, uint32_t w, const ReportedAttempt& run) {
  const ResourceRequest& req = s.RequestOf(r);
  if (!s.config.queue_ahead || !Queueable(req) || run.cores.size() != req.CoreCount() ||
      !run.gpus.empty() || !s.workers[w].res->CanEverFit(req)) {
    return false;
  }
  // The attempt it waits behind holds its cores and nothing waits there yet.
  uint32_t prev = kNone;
  for (uint32_t a : s.workers[w].actives) {
    const Active& act = s.actives[a];
    if (!IsTail(act) || act.alloc.mem_bytes < req.mem_bytes) {
      continue;
    }
    const bool covers = std::all_of(run.cores.begin(), run.cores.end(), [&](uint32_t core) {
      return std::find(act.alloc.cores.begin(), act.alloc.cores.end(), core) !=
             act.alloc.cores.end();
    });
    if (covers) {
      prev = a;
      break;
    }
  }
  if (prev == kNone) return false;
  if (s.reservation.IsFor(r)) EndReservation(s);
  Task& t = s.task(r);
  t.flags = {};  // queue, backoff and parked entries of the queued task go stale
  t.attempt = static_cast<uint16_t>(run.attempt);
  t.worker = s.workers[w].id;
  const uint32_t a = NewActive(s, r, w, run.attempt);
  Active& act = s.actives[a];
  act.alloc.cores.assign(run.cores.begin(), run.cores.end());
  act.alloc.mem_bytes = req.mem_bytes;
  LinkBehind(s, a, prev, UINT64_MAX);
  s.out->emplace_back(std::in_place_type<ClaimLeases>, s.IdOf(r), run.attempt, s.workers[w].id,
                      KeysOf(s, act), s.config.lease_ttl);
  Transition(s, r, TaskState::kAssigned);
  return true;
}

}  // namespace drover::core
