// Worker events: a worker joins, attaches (its hello), heartbeats, is lost,
// drains or pauses; a known worker's new offer (Reoffer) and the attempts
// that no longer fit it. Re-attach and adoption are in adoption.cc.
#include <algorithm>

#include "common/quantity.h"
#include "core/adoption_ops.h"
#include "core/attempt_events_ops.h"
#include "core/leases_ops.h"
#include "core/lineage_ops.h"
#include "core/lookup_ops.h"
#include "core/preemption_ops.h"
#include "core/quarantine_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"
#include "core/worker_events_ops.h"

namespace drover::core {

Status OnWorkerJoined(State& s, WorkerJoined& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = s.worker_slots.find(e.worker);
  uint32_t w;
  if (it == s.worker_slots.end()) {
    w = static_cast<uint32_t>(s.workers.size());
    s.workers.emplace_back();
    s.workers[w].id = e.worker;
    s.worker_slots.emplace(e.worker, w);
  } else {
    w = it->second;
    if (!s.workers[w].lost) {
      return FailedPrecondition("worker " + std::to_string(e.worker) + " joined twice");
    }
  }
  Worker& worker = s.workers[w];
  // Room for a task per core, reserved (not touched) up front: growing the
  // Active table by doubling while a wave of placements fills a big pool
  // copied and faulted in twice its size (B1 at 10,000 workers).
  const size_t cores = e.resources.cpu_cores.size();
  worker.actives.reserve(cores);
  if (!worker.lost) {
    s.pool_cores += cores;
    if (s.actives.capacity() < s.pool_cores) {
      s.actives.reserve(std::max<size_t>(s.pool_cores, 2 * s.actives.capacity()));
    }
  }
  worker.res = std::make_unique<WorkerState>(e.worker, std::move(e.resources));
  NoteEnding(s, w);
  if (worker.lost && s.lost_workers > 0) --s.lost_workers;
  worker.lost = false;
  worker.drained = false;
  worker.paused = false;  // a desktop worker says again after its hello
  worker.refusing = false;
  worker.unhealthy.clear();  // it says again in its first heartbeat
  worker.sick_gpus.clear();  // likewise (its offer's GPUs are all in, above)
  ResumeQuarantine(s, w);    // one a restore replayed, or it had when lost
  worker.last_heartbeat = TimeFromMicros(s.now_us);
  // Tasks still on it from before (lost, leases not yet expired) keep their
  // resources booked on the new incarnation, so nothing is handed out twice.
  for (uint32_t a : worker.actives) {
    Active& act = s.actives[a];
    // One queued behind another holds nothing of its own until that ends.
    act.booked = act.prev == kNone && worker.res->AllocateExact(s.RequestOf(act.task), act.alloc);
  }
  // Restored tasks that ran here come back to it the same way (only this
  // worker's: a storm of joins costs the orphans once, not once per join).
  if (auto orphaned = s.adoption.orphans.find(e.worker); orphaned != s.adoption.orphans.end()) {
    const std::vector<uint32_t> slots = std::move(orphaned->second);
    s.adoption.orphans.erase(orphaned);
    for (uint32_t a : slots) {
      Active& act = s.actives[a];
      if (act.worker != kNone || act.attempt == 0 || !act.lost) continue;
      if (s.task(act.task).worker != e.worker || s.task(act.task).active != a) continue;
      act.worker = w;
      act.pos = static_cast<uint32_t>(worker.actives.size());
      worker.actives.push_back(a);
      act.booked = act.prev == kNone && worker.res->AllocateExact(s.RequestOf(act.task), act.alloc);
    }
  }
  NoteTail(s, w);
  // Placed on unless it is in quarantine (lost in one, or one a restore
  // replayed).
  SyncPolicy(s, w);
  MarkWorkerDirty(s, w);
  if (s.adoption.settling) SettleAttached(s, e.worker);
  return Status::Ok();
}

Status OnWorkerAttached(State& s, WorkerAttached& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = s.worker_slots.find(e.worker);
  const bool joins = it == s.worker_slots.end() || s.workers[it->second].lost;
  const bool known = it != s.worker_slots.end() && s.workers[it->second].res != nullptr;
  const bool new_offer = known && !(s.workers[it->second].res->resources() == e.resources);
  // Only a worker the restore expected, on its first attach since, can hold
  // an attempt the journal never saw (events.h).
  s.adoption.BeginAttach(e.worker);
  if (joins) {
    WorkerJoined join{e.worker, e.resources};
    Status joined = OnWorkerJoined(s, join);
    if (!joined.ok()) {
      s.adoption.EndAttach();
      return joined;
    }
  }
  const uint32_t w = s.worker_slots.at(e.worker);
  s.workers[w].last_heartbeat = TimeFromMicros(s.now_us);
  // First what it does not hold goes: its resources are free for what it
  // reports below (adopted attempts need exactly theirs).
  TakeBackUnreported(s, w, e);
  // A stop sent before (cancel, timeout, lost lease) may have been lost with
  // the old connection: what it still runs of those is stopped again.
  for (const ReportedAttempt& run : e.running) {
    Result<TaskRef> r = s.Find(run.task);
    if (!r.ok()) continue;
    const Task& t = s.task(*r);
    if (t.active == kNone || s.actives[t.active].attempt != run.attempt || t.worker != e.worker) {
      continue;
    }
    if (t.flags.Any(TaskFlag::kLeaseLost | TaskFlag::kResized)) {
      s.out->push_back(KillTask{
          run.task, run.attempt, e.worker,
          why::StoppedBeforeReattach(t.flags.Has(TaskFlag::kLeaseLost) ? EndKind::kLeaseLost
                                                                       : EndKind::kResized),
          /*hard=*/true});
    } else if (t.flags.Any(TaskFlag::kCancel | TaskFlag::kTimedOut)) {
      s.out->push_back(KillTask{run.task, run.attempt, e.worker,
                                t.flags.Has(TaskFlag::kCancel)
                                    ? CancelReasonOf(s, *r)
                                    : why::TimedOut(s.SpecOf(*r).timeout)});
    }
  }
  if (!joins && new_offer) {
    Reoffer(s, w, std::move(e.resources));
  } else if (joins && new_offer) {
    // Re-joined after a loss with another offer (OnWorkerJoined booked what
    // still fits on it).
    ++s.workers[w].offer_changes;
    s.workers[w].offer_changed_at = TimeFromMicros(s.now_us);
    StopUnfitting(s, w);
  }
  if (s.workers[w].refusing) {
    s.workers[w].refusing = false;  // its account is fresh: offer it work again
    SyncPolicy(s, w);
  }
  // Results first: a dependency that finished may make a running dependent
  // adoptable (queued) below.
  for (TaskFinished& f : e.finished) {
    f.worker = e.worker;
    Result<TaskRef> r = s.Find(f.task);
    if (r.ok() && Adoptable(s, *r, f.attempt)) Adopt(s, *r, w, f.attempt, nullptr);
    (void)OnFinished(s, f);  // a stale one (ended or superseded) changes nothing
  }
  // Started ones first: an attempt queued behind one the journal never saw
  // goes behind it once that one is adopted.
  for (const ReportedAttempt& run : e.running) {
    if (!run.queued) ReconcileRunning(s, w, run);
  }
  for (const ReportedAttempt& run : e.running) {
    if (run.queued) ReconcileRunning(s, w, run);
  }
  s.adoption.EndAttach();
  // Only now (its attempts adopted) may the hold end; Handle dispatches after.
  if (s.adoption.settling) SettleAttached(s, e.worker);
  return Status::Ok();
}

void Reoffer(State& s, uint32_t w, WorkerResources resources) {
  Worker& worker = s.workers[w];
  for (uint32_t a : worker.actives) {
    Active& act = s.actives[a];
    if (act.booked) worker.res->Free(s.RequestOf(act.task), act.alloc);
    act.booked = false;
  }
  const size_t old_cores = worker.res->resources().cpu_cores.size();
  if (resources.cpu_cores.size() > old_cores) {
    s.pool_cores += resources.cpu_cores.size() - old_cores;
    if (s.actives.capacity() < s.pool_cores) s.actives.reserve(s.pool_cores);
  }
  worker.res = std::make_unique<WorkerState>(worker.id, std::move(resources));
  NoteEnding(s, w);
  ++worker.offer_changes;
  worker.offer_changed_at = TimeFromMicros(s.now_us);
  StopUnfitting(s, w);
  NoteTail(s, w);
  WorkerTasksChanged(s, w);
  MarkLoadDirty(s, w);
  if (worker.in_policy) {
    s.policy->Remove(w);  // its load key changes with its size
    worker.in_policy = false;
  }
  SyncPolicy(s, w);
  if (Schedulable(s, w)) MarkWorkerDirty(s, w);
}

void StopUnfitting(State& s, uint32_t w) {
  Worker& worker = s.workers[w];
  const std::vector<uint32_t> on_worker = worker.actives;
  for (uint32_t a : on_worker) {
    Active& act = s.actives[a];
    // One waiting behind another books nothing until its predecessor ends.
    if (act.prev != kNone || act.booked) continue;
    act.booked = worker.res->AllocateExact(s.RequestOf(act.task), act.alloc);
    if (act.booked) continue;
    const TaskRef r = act.task;
    Task& t = s.task(r);
    if (t.active != a) continue;
    const Reason why = why::Resized(worker.id, /*ran=*/false);
    if (!act.granted && !act.lost) {
      // Never sent: give the claim back and place it again.
      EmitRelease(s, act);
      EndActive(s, a);
      NeverStarted(s, r, why);
      continue;
    }
    if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut |
                     TaskFlag::kResized)) {
      t.flags.Set(TaskFlag::kResized);
      s.out->push_back(KillTask{s.IdOf(r), act.attempt, worker.id, why, /*hard=*/true});
    }
  }
}

void SyncPolicy(State& s, uint32_t w) {
  Worker& worker = s.workers[w];
  const bool want = Schedulable(s, w);
  if (want == worker.in_policy) return;
  if (want) {
    s.policy->Add(LoadOf(s, w));
    MarkWorkerDirty(s, w);
  } else {
    s.policy->Remove(w);
    if (s.reservation.IsOn(w)) s.reservation.active = false;
    DropPreemptionOn(s, w);  // its preemptor may preempt elsewhere
  }
  worker.in_policy = want;
}

Status OnHeartbeat(State& s, WorkerHeartbeat& e) {
  ASSIGN_OR_RETURN(uint32_t w, s.FindWorker(e.worker));
  if (s.workers[w].lost) return FailedPrecondition("heartbeat from lost worker");
  Worker& worker = s.workers[w];
  worker.util = std::move(e.utilization);
  worker.last_heartbeat = TimeFromMicros(s.now_us);
  MarkLoadDirty(s, w);
  // More room on its disk: a task whose `disk` did not fit may now.
  if (worker.util.disk_free_bytes && worker.res->SetDiskFree(*worker.util.disk_free_bytes) &&
      Schedulable(s, w)) {
    MarkWorkerDirty(s, w);
  }
  bool sync = false;
  if (worker.refusing) {
    worker.refusing = false;  // it has caught up (or refuses again)
    sync = true;
  }
  if (worker.sick_gpus != e.sick_gpus) {
    for (const auto& [index, why] : worker.sick_gpus) {
      if (!e.sick_gpus.count(index)) worker.res->SetGpuOut(index, false);
    }
    for (const auto& [index, why] : e.sick_gpus) worker.res->SetGpuOut(index, true);
    worker.sick_gpus = std::move(e.sick_gpus);
    sync = true;
  }
  if (worker.unhealthy != e.unhealthy) {
    if (worker.unhealthy.empty()) worker.unhealthy_since = worker.last_heartbeat;
    worker.unhealthy = std::move(e.unhealthy);
    sync = true;
  }
  if (sync) SyncPolicy(s, w);
  return Status::Ok();
}

Status OnWorkerLost(State& s, const WorkerLost& e) {
  ASSIGN_OR_RETURN(uint32_t w, s.FindWorker(e.worker));
  Worker& worker = s.workers[w];
  if (worker.lost)
    return FailedPrecondition("worker " + std::to_string(e.worker) + " already lost");
  worker.lost = true;
  worker.lost_us = s.now_us;
  ++s.lost_workers;
  NoteOutputsLost(s, w);  // a dependent may need to rerun their producers (lineage.cc)
  if (worker.in_policy) s.policy->Remove(w);
  worker.in_policy = false;
  if (s.reservation.IsOn(w)) s.reservation.active = false;
  DropPreemptionOn(s, w);  // its preemptor may preempt elsewhere
  // Leases stop being renewed now; the tasks wait for them to expire.
  for (uint32_t a : worker.actives) {
    Active& act = s.actives[a];
    if (act.lost) continue;
    act.lost = true;
    PushTimer(s, act.lease_from_us + (s.config.lease_ttl + s.config.expiry_grace).count(),
              TimerKind::kLostExpiry, act.task, act.attempt);
  }
  return Status::Ok();
}

Status OnDrained(State& s, const WorkerDrained& e) {
  ASSIGN_OR_RETURN(uint32_t w, s.FindWorker(e.worker));
  Worker& worker = s.workers[w];
  worker.drained = e.drained;
  if (!e.drained) LiftQuarantine(s, w);  // an admin's undrain lifts it too
  if (worker.lost) return Status::Ok();
  SyncPolicy(s, w);
  return Status::Ok();
}

Status OnPaused(State& s, const WorkerPaused& e) {
  ASSIGN_OR_RETURN(uint32_t w, s.FindWorker(e.worker));
  Worker& worker = s.workers[w];
  worker.paused = e.paused;
  worker.note = e.note;
  worker.note_since = e.since;
  if (worker.lost) return Status::Ok();
  SyncPolicy(s, w);
  return Status::Ok();
}

}  // namespace drover::core
