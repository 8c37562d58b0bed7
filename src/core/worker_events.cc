// Worker events: a worker joins, attaches (its hello), heartbeats, is lost,
// drains or pauses; a known worker's new offer (Reoffer) and the attempts
// that no longer fit it. Re-attach and adoption are in adoption.cc.
#include <algorithm>

#include "common/quantity.h"
#include "core/scheduler_state.h"

namespace drover::core {

Status Scheduler::State::OnWorkerJoined(WorkerJoined& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = worker_slots.find(e.worker);
  uint32_t w;
  if (it == worker_slots.end()) {
    w = static_cast<uint32_t>(workers.size());
    workers.emplace_back();
    workers[w].id = e.worker;
    worker_slots.emplace(e.worker, w);
  } else {
    w = it->second;
    if (!workers[w].lost) {
      return FailedPrecondition("worker " + std::to_string(e.worker) + " joined twice");
    }
  }
  Worker& worker = workers[w];
  // Room for a task per core, reserved (not touched) up front: growing the
  // Active table by doubling while a wave of placements fills a big pool
  // copied and faulted in twice its size (B1 at 10,000 workers).
  const size_t cores = e.resources.cpu_cores.size();
  worker.actives.reserve(cores);
  if (!worker.lost) {
    pool_cores += cores;
    if (actives.capacity() < pool_cores) {
      actives.reserve(std::max<size_t>(pool_cores, 2 * actives.capacity()));
    }
  }
  worker.res = std::make_unique<WorkerState>(e.worker, std::move(e.resources));
  NoteEnding(w);
  if (worker.lost && lost_workers > 0) --lost_workers;
  worker.lost = false;
  worker.drained = false;
  worker.paused = false;  // a desktop worker says again after its hello
  worker.refusing = false;
  worker.last_heartbeat = TimeFromMicros(now_us);
  // Tasks still on it from before (lost, leases not yet expired) keep their
  // resources booked on the new incarnation, so nothing is handed out twice.
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    // One queued behind another holds nothing of its own until that ends.
    act.booked = act.prev == kNone && worker.res->AllocateExact(RequestOf(act.task), act.alloc);
  }
  // Restored tasks that ran here come back to it the same way (only this
  // worker's: a storm of joins costs the orphans once, not once per join).
  if (auto orphaned = adoption.orphans.find(e.worker); orphaned != adoption.orphans.end()) {
    const std::vector<uint32_t> slots = std::move(orphaned->second);
    adoption.orphans.erase(orphaned);
    for (uint32_t a : slots) {
      Active& act = actives[a];
      if (act.worker != kNone || act.attempt == 0 || !act.lost) continue;
      if (task(act.task).worker != e.worker || task(act.task).active != a) continue;
      act.worker = w;
      act.pos = static_cast<uint32_t>(worker.actives.size());
      worker.actives.push_back(a);
      act.booked = act.prev == kNone && worker.res->AllocateExact(RequestOf(act.task), act.alloc);
    }
  }
  NoteTail(w);
  policy->Add(LoadOf(w));
  worker.in_policy = true;
  MarkWorkerDirty(w);
  if (adoption.settling) SettleAttached(e.worker);
  return Status::Ok();
}

Status Scheduler::State::OnWorkerAttached(WorkerAttached& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = worker_slots.find(e.worker);
  const bool joins = it == worker_slots.end() || workers[it->second].lost;
  const bool known = it != worker_slots.end() && workers[it->second].res != nullptr;
  const bool new_offer = known && !(workers[it->second].res->resources() == e.resources);
  // Only a worker the restore expected, on its first attach since, can hold
  // an attempt the journal never saw (events.h).
  adoption.BeginAttach(e.worker);
  if (joins) {
    WorkerJoined join{e.worker, e.resources};
    Status joined = OnWorkerJoined(join);
    if (!joined.ok()) {
      adoption.EndAttach();
      return joined;
    }
  }
  const uint32_t w = worker_slots.at(e.worker);
  workers[w].last_heartbeat = TimeFromMicros(now_us);
  // First what it does not hold goes: its resources are free for what it
  // reports below (adopted attempts need exactly theirs).
  TakeBackUnreported(w, e);
  // A stop sent before (cancel, timeout, lost lease) may have been lost with
  // the old connection: what it still runs of those is stopped again.
  for (const ReportedAttempt& run : e.running) {
    Result<TaskRef> r = Find(run.task);
    if (!r.ok()) continue;
    const Task& t = task(*r);
    if (t.active == kNone || actives[t.active].attempt != run.attempt || t.worker != e.worker) {
      continue;
    }
    if (t.flags.Any(TaskFlag::kLeaseLost | TaskFlag::kResized)) {
      out->push_back(KillTask{run.task, run.attempt, e.worker,
                              why::StoppedBeforeReattach(t.flags.Has(TaskFlag::kLeaseLost)
                                                             ? EndKind::kLeaseLost
                                                             : EndKind::kResized),
                              /*hard=*/true});
    } else if (t.flags.Any(TaskFlag::kCancel | TaskFlag::kTimedOut)) {
      out->push_back(KillTask{run.task, run.attempt, e.worker,
                              t.flags.Has(TaskFlag::kCancel)
                                  ? CancelReasonOf(*r)
                                  : why::TimedOut(SpecOf(*r).timeout)});
    }
  }
  if (!joins && new_offer) {
    Reoffer(w, std::move(e.resources));
  } else if (joins && new_offer) {
    // Re-joined after a loss with another offer (OnWorkerJoined booked what
    // still fits on it).
    ++workers[w].offer_changes;
    workers[w].offer_changed_at = TimeFromMicros(now_us);
    StopUnfitting(w);
  }
  if (workers[w].refusing) {
    workers[w].refusing = false;  // its account is fresh: offer it work again
    SyncPolicy(w);
  }
  // Results first: a dependency that finished may make a running dependent
  // adoptable (queued) below.
  for (TaskFinished& f : e.finished) {
    f.worker = e.worker;
    Result<TaskRef> r = Find(f.task);
    if (r.ok() && Adoptable(*r, f.attempt)) Adopt(*r, w, f.attempt, nullptr);
    (void)OnFinished(f);  // a stale one (ended or superseded) changes nothing
  }
  // Started ones first: an attempt queued behind one the journal never saw
  // goes behind it once that one is adopted.
  for (const ReportedAttempt& run : e.running) {
    if (!run.queued) ReconcileRunning(w, run);
  }
  for (const ReportedAttempt& run : e.running) {
    if (run.queued) ReconcileRunning(w, run);
  }
  adoption.EndAttach();
  // Only now (its attempts adopted) may the hold end; Handle dispatches after.
  if (adoption.settling) SettleAttached(e.worker);
  return Status::Ok();
}

void Scheduler::State::Reoffer(uint32_t w, WorkerResources resources) {
  Worker& worker = workers[w];
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    if (act.booked) worker.res->Free(RequestOf(act.task), act.alloc);
    act.booked = false;
  }
  const size_t old_cores = worker.res->resources().cpu_cores.size();
  if (resources.cpu_cores.size() > old_cores) {
    pool_cores += resources.cpu_cores.size() - old_cores;
    if (actives.capacity() < pool_cores) actives.reserve(pool_cores);
  }
  worker.res = std::make_unique<WorkerState>(worker.id, std::move(resources));
  NoteEnding(w);
  ++worker.offer_changes;
  worker.offer_changed_at = TimeFromMicros(now_us);
  StopUnfitting(w);
  NoteTail(w);
  WorkerTasksChanged(w);
  MarkLoadDirty(w);
  if (worker.in_policy) {
    policy->Remove(w);  // its load key changes with its size
    worker.in_policy = false;
  }
  SyncPolicy(w);
  if (Schedulable(w)) MarkWorkerDirty(w);
}

void Scheduler::State::StopUnfitting(uint32_t w) {
  Worker& worker = workers[w];
  const std::vector<uint32_t> on_worker = worker.actives;
  for (uint32_t a : on_worker) {
    Active& act = actives[a];
    // One waiting behind another books nothing until its predecessor ends.
    if (act.prev != kNone || act.booked) continue;
    act.booked = worker.res->AllocateExact(RequestOf(act.task), act.alloc);
    if (act.booked) continue;
    const TaskRef r = act.task;
    Task& t = task(r);
    if (t.active != a) continue;
    const Reason why = why::Resized(worker.id, /*ran=*/false);
    if (!act.granted && !act.lost) {
      // Never sent: give the claim back and place it again.
      EmitRelease(act);
      EndActive(a);
      NeverStarted(r, why);
      continue;
    }
    if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut |
                     TaskFlag::kResized)) {
      t.flags.Set(TaskFlag::kResized);
      out->push_back(KillTask{IdOf(r), act.attempt, worker.id, why, /*hard=*/true});
    }
  }
}

void Scheduler::State::SyncPolicy(uint32_t w) {
  Worker& worker = workers[w];
  const bool want = Schedulable(w);
  if (want == worker.in_policy) return;
  if (want) {
    policy->Add(LoadOf(w));
    MarkWorkerDirty(w);
  } else {
    policy->Remove(w);
    if (reservation.IsOn(w)) reservation.active = false;
    DropPreemptionOn(w);  // its preemptor may preempt elsewhere
  }
  worker.in_policy = want;
}

Status Scheduler::State::OnHeartbeat(WorkerHeartbeat& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  if (workers[w].lost) return FailedPrecondition("heartbeat from lost worker");
  workers[w].util = std::move(e.utilization);
  workers[w].last_heartbeat = TimeFromMicros(now_us);
  MarkLoadDirty(w);
  if (workers[w].refusing) {
    workers[w].refusing = false;  // it has caught up (or refuses again)
    SyncPolicy(w);
  }
  return Status::Ok();
}

Status Scheduler::State::OnWorkerLost(const WorkerLost& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  if (worker.lost)
    return FailedPrecondition("worker " + std::to_string(e.worker) + " already lost");
  worker.lost = true;
  worker.lost_us = now_us;
  ++lost_workers;
  NoteOutputsLost(w);  // a dependent may need to rerun their producers (lineage.cc)
  if (worker.in_policy) policy->Remove(w);
  worker.in_policy = false;
  if (reservation.IsOn(w)) reservation.active = false;
  DropPreemptionOn(w);  // its preemptor may preempt elsewhere
  // Leases stop being renewed now; the tasks wait for them to expire.
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    if (act.lost) continue;
    act.lost = true;
    PushTimer(act.lease_from_us + (config.lease_ttl + config.expiry_grace).count(),
              TimerKind::kLostExpiry, act.task, act.attempt);
  }
  return Status::Ok();
}

Status Scheduler::State::OnDrained(const WorkerDrained& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  worker.drained = e.drained;
  if (worker.lost) return Status::Ok();
  SyncPolicy(w);
  return Status::Ok();
}

Status Scheduler::State::OnPaused(const WorkerPaused& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  worker.paused = e.paused;
  worker.note = e.note;
  worker.note_since = e.since;
  if (worker.lost) return Status::Ok();
  SyncPolicy(w);
  return Status::Ok();
}

}  // namespace drover::core
