// Re-attach and adoption after a restart (adoption.h): a worker's report
// reconciled with what the core has there, attempts the journal never saw
// adopted, and the placement hold that waits for the workers to report.
#include <algorithm>
#include <set>

#include "core/scheduler_state.h"

namespace drover::core {

void Scheduler::State::SettleAttached(WorkerId worker) {
  if (adoption.Attached(worker)) EndSettle();
}

void Scheduler::State::EndSettle() {
  adoption.StopSettling();
  for (uint32_t cls = 0; cls < queues.class_count(); ++cls) MarkClassDirty(cls);
  for (uint32_t w = 0; w < workers.size(); ++w) {
    if (Schedulable(w)) MarkWorkerDirty(w);
  }
}

void Scheduler::State::TakeBackUnreported(uint32_t w, const WorkerAttached& e) {
  std::set<std::pair<TaskId, uint32_t>> held;
  for (const ReportedAttempt& run : e.running) held.emplace(run.task, run.attempt);
  for (const TaskFinished& f : e.finished) held.emplace(f.task, f.attempt);
  std::vector<uint32_t> gone;
  for (uint32_t a : workers[w].actives) {
    const Active& act = actives[a];
    // A claim still pending was never sent: its grant sends it on the new
    // connection. A lost (or restored) attempt's claim was made before.
    if (!act.granted && !act.lost) continue;
    if (!held.count({IdOf(act.task), act.attempt})) gone.push_back(a);
  }
  // Waiters before the attempts they wait behind: ending a predecessor
  // first would hand its resources to a waiter that is gone too.
  std::stable_partition(gone.begin(), gone.end(),
                        [&](uint32_t a) { return actives[a].prev != kNone; });
  for (uint32_t a : gone) {
    const TaskRef r = actives[a].task;
    Task& t = task(r);
    if (t.active != a) continue;
    const bool started = t.state == TaskState::kRunning;
    EmitRelease(actives[a]);
    if (started) {
      LostAttemptEnded(r, why::ReattachedWithout(workers[w].id, /*ran=*/true));
      continue;
    }
    EndActive(a);
    if (t.flags.Has(TaskFlag::kCancel)) {
      t.flags.KeepOnly(TaskFlag::kStaleEntry);
      DropHold(r);
      Transition(r, TaskState::kCanceled, CancelReasonOf(r));
      continue;
    }
    NeverStarted(r, why::ReattachedWithout(workers[w].id, /*ran=*/false));
  }
}

bool Scheduler::State::Adoptable(TaskRef r, uint32_t attempt) const {
  // Every attempt the journal saw is <= the task's attempt; a higher one was
  // assigned by a server that crashed before its record was durable, and
  // only to a worker that was active then, reporting on its first attach.
  const Task& t = task(r);
  return adoption.adopting && t.state == TaskState::kQueued && t.active == kNone &&
         attempt > t.attempt && attempt <= UINT16_MAX;
}

void Scheduler::State::ReconcileRunning(uint32_t w, const ReportedAttempt& run) {
  const WorkerId id = workers[w].id;
  auto kill = [&](why::Fence fence) {
    out->push_back(KillTask{run.task, run.attempt, id, why::Fenced(fence), true});
  };
  Result<TaskRef> found = Find(run.task);
  if (!found.ok()) return kill(why::Fence::kUnknownTask);
  const TaskRef r = *found;
  Task& t = task(r);
  if (t.active != kNone && actives[t.active].attempt == run.attempt && t.worker == id) {
    Active& act = actives[t.active];
    if (act.worker != w) return kill(why::Fence::kNotCurrent);  // not re-booked (defensive)
    // Its worker has it: renew its leases again (a restored or lost attempt
    // would otherwise be requeued at its lease expiry while it runs).
    act.lost = false;
    if (t.state == TaskState::kAssigned && !run.queued) {
      (void)OnStarted(TaskStarted{run.task, run.attempt, id});
    }
    // A queued one was sent, so its claim was granted: renew it from now on.
    if (run.queued) act.granted = true;
    if (run.queued && t.flags.Has(TaskFlag::kWithdraw)) {
      // The withdrawal may have been lost with the connection: again.
      out->push_back(KillTask{run.task, run.attempt, id, why::RoomFreedElsewhere(),
                              /*hard=*/false, /*only_queued=*/true});
    }
    return;
  }
  if (run.queued) {
    // Waiting behind another attempt, and the journal never saw it: it goes
    // back behind that one, or (no such place) it is dropped, which costs
    // nothing since it never started.
    if (Adoptable(r, run.attempt) && AdoptQueued(r, w, run)) return;
    kill(why::Fence::kQueuedNotCurrent);
  } else if (Adoptable(r, run.attempt) && workers[w].res->CanEverFit(RequestOf(r))) {
    if (Adopt(r, w, run.attempt, &run)) return;
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

bool Scheduler::State::Adopt(TaskRef r, uint32_t w, uint32_t attempt, const ReportedAttempt* run) {
  Task& t = task(r);
  const ResourceRequest& req = RequestOf(r);
  // A task this worker could never run was never given to it.
  if (!workers[w].res->CanEverFit(req)) return false;
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
    if (!workers[w].res->AllocateExact(req, alloc)) return false;
  }
  if (reservation.IsFor(r)) EndReservation();
  t.flags = {};  // queue, backoff and parked entries of the queued task go stale
  t.attempt = static_cast<uint16_t>(attempt);
  t.worker = workers[w].id;
  const uint32_t a = NewActive(r, w, attempt);
  Active& act = actives[a];
  act.alloc = std::move(alloc);
  if (run != nullptr) {
    act.booked = true;
    out->emplace_back(std::in_place_type<ClaimLeases>, IdOf(r), attempt, workers[w].id, KeysOf(act),
                      config.lease_ttl);
  } else {
    act.lost = true;  // ended already: nothing held, nothing to release
  }
  Transition(r, TaskState::kAssigned);
  t.started_us = now_us;
  WorkerTasksChanged(w);  // its time limit counts from now
  Transition(r, TaskState::kRunning);
  const Duration timeout = SpecOf(r).timeout;
  if (run != nullptr && timeout > Duration::zero()) {
    PushTimer(now_us + timeout.count(), TimerKind::kTimeout, r, attempt);
  }
  return true;
}

bool Scheduler::State::AdoptQueued(TaskRef r, uint32_t w, const ReportedAttempt& run) {
  const ResourceRequest& req = RequestOf(r);
  if (!config.queue_ahead || !Queueable(req) || run.cores.size() != req.CoreCount() ||
      !run.gpus.empty() || !workers[w].res->CanEverFit(req)) {
    return false;
  }
  // The attempt it waits behind holds its cores and nothing waits there yet.
  uint32_t prev = kNone;
  for (uint32_t a : workers[w].actives) {
    const Active& act = actives[a];
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
  if (reservation.IsFor(r)) EndReservation();
  Task& t = task(r);
  t.flags = {};  // queue, backoff and parked entries of the queued task go stale
  t.attempt = static_cast<uint16_t>(run.attempt);
  t.worker = workers[w].id;
  const uint32_t a = NewActive(r, w, run.attempt);
  Active& act = actives[a];
  act.alloc.cores.assign(run.cores.begin(), run.cores.end());
  act.alloc.mem_bytes = req.mem_bytes;
  LinkBehind(a, prev, UINT64_MAX);
  out->emplace_back(std::in_place_type<ClaimLeases>, IdOf(r), run.attempt, workers[w].id,
                    KeysOf(act), config.lease_ttl);
  Transition(r, TaskState::kAssigned);
  return true;
}

}  // namespace drover::core
