// Reservations and backfill (reservation.h): which worker is held for the
// task being overtaken, what else may run there meanwhile, and the tasks
// from behind their class heads that fit before its planned start.
#include <algorithm>

#include "core/dispatch_ops.h"
#include "core/leases_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

int64_t FitTime(const State& s, uint32_t w, const ResourceRequest& req) {
  const Worker& worker = s.workers[w];
  if (worker.res->Fits(req, s.policy->PreferFullGpus())) return s.now_us;
  // Free the tasks with a time limit in the order their limits end, on a
  // copy, until the request fits. A task past its limit is being killed.
  std::vector<std::pair<int64_t, uint32_t>> ends;  // (end, active)
  for (uint32_t a : worker.actives) {
    const Active& act = s.actives[a];
    const int64_t limit = s.SpecOf(act.task).timeout.count();
    if (!act.booked || limit <= 0) continue;
    const Task& t = s.task(act.task);
    const int64_t from = t.state == TaskState::kRunning ? t.started_us : s.now_us;
    int64_t end = std::max(from + limit, s.now_us);
    if (act.next != kNone) {
      // The task queued behind it holds the room on until its own limit.
      const int64_t then = s.SpecOf(s.actives[act.next].task).timeout.count();
      if (then <= 0) continue;
      end += then;
    }
    ends.emplace_back(end, a);
  }
  if (ends.empty()) return kNever;
  std::sort(ends.begin(), ends.end());
  WorkerState after = *worker.res;
  for (const auto& [end, a] : ends) {
    after.Free(s.RequestOf(s.actives[a].task), s.actives[a].alloc);
    if (after.Fits(req, s.policy->PreferFullGpus())) return end;
  }
  return kNever;
}

int64_t ReservationShadow(State& s) {
  if (!s.reservation.shadow_valid) {
    s.reservation.shadow_us = FitTime(s, s.reservation.worker, s.RequestOf(s.reservation.task));
    s.reservation.shadow_valid = true;
  }
  // As time passes, tasks past their limit count as ending now; that keeps
  // the order FitTime freed them in, so its answer moves to max(it, now).
  const int64_t shadow = s.reservation.shadow_us;
  return shadow == kNever ? kNever : std::max(shadow, s.now_us);
}

bool ReservationAllows(State& s, uint32_t w, TaskRef r) {
  // Backfill by time (EASY): a task whose time limit ends before the
  // reserved task could start here anyway delays nothing.
  const int64_t limit = s.SpecOf(r).timeout.count();
  if (limit > 0) {
    const int64_t shadow = ReservationShadow(s);
    if (shadow != kNever && s.now_us + limit <= shadow) return true;
  }
  WorkerState& res = *s.workers[w].res;
  const ResourceRequest& reserved = s.RequestOf(s.reservation.task);
  const ResourceRequest& req = s.RequestOf(r);
  const uint32_t short_now = res.Shortfall(reserved);
  uint32_t uses = 0;
  if (req.CoreCount() > 0) uses |= kDimCores;
  if (req.mem_bytes > 0) uses |= kDimMem;
  if (req.gpus > 0) uses |= kDimGpus;
  if (!req.counters.empty()) uses |= kDimCounters;
  if (uses & short_now) return false;
  // Try it: placing r must not make the reserved task short of anything new.
  return AfterPlacing(s, w, r, [&] { return res.Shortfall(reserved) == short_now; });
}

void EndReservation(State& s) {
  if (!s.reservation.active) return;
  s.reservation.active = false;
  if (Schedulable(s, s.reservation.worker)) MarkWorkerDirty(s, s.reservation.worker);
}

void Reserve(State& s, TaskRef r, uint32_t hint) {
  if (!s.config.reservations) return;
  if (s.preemption.For(r) != nullptr) return;  // the worker it preempts on is held for it
  if (s.reservation.active) {
    if (s.reservation.task == r) return;
    // Keep an existing reservation for a task that runs before r.
    const Task& held = s.task(s.reservation.task);
    if (held.state == TaskState::kQueued) {
      const int32_t p_held = s.SpecOf(s.reservation.task).priority;
      const int32_t p_new = s.SpecOf(r).priority;
      if (p_held > p_new || (p_held == p_new && s.reservation.task < r)) return;
    }
  }
  const ResourceRequest& req = s.RequestOf(r);
  uint32_t chosen = kNone;
  // The worker where it can start first, by the time limits of what runs
  // there (ties: the hint, then join order); without limits, the hint.
  int64_t best = kNever;
  for (uint32_t w = 0; w < s.workers.size(); ++w) {
    // A worker held for a preemptor is not to be had.
    if (!Schedulable(s, w) || !CanEverRun(s, w, r) || s.preemption.On(w) != nullptr) continue;
    const int64_t at = FitTime(s, w, req);
    // A worker that leaves is held only for a task that ends there in time.
    if (Ending(s, w) && (at == kNever || !LastsFor(s, w, r, at))) continue;
    if (at < best || (at == best && at != kNever && w == hint)) {
      best = at;
      chosen = w;
    }
  }
  const auto holdable = [&](uint32_t w) {
    return Schedulable(s, w) && !Ending(s, w) && s.workers[w].res->CanEverFit(req) &&
           s.preemption.On(w) == nullptr;
  };
  if (chosen == kNone && hint != kNone && holdable(hint)) chosen = hint;
  for (uint32_t w = 0; w < s.workers.size() && chosen == kNone; ++w) {
    if (holdable(w)) chosen = w;
  }
  if (chosen == kNone) return;
  EndReservation(s);
  s.reservation = Reservation{true, r, chosen};
  // Offer the worker again: the reserved task fits there now (a worker that
  // changed this instant), or tasks behind their class heads may backfill
  // what it waits for (BackfillBehindHeads).
  MarkWorkerDirty(s, chosen);
}

void BackfillBehindHeads(State& s, uint32_t w) {
  // EASY backfill reaches past the class heads here: the heads were just
  // offered this worker and those held back cannot use its free room without
  // delaying the reserved task. A queued task further back whose time limit
  // ends by the reservation's planned start can: it delays the reserved task
  // not at all, and the tasks ahead of it in its class not either (they
  // could not have used this room before the planned start, and after it the
  // reserved task takes it).
  const int64_t shadow = ReservationShadow(s);
  if (shadow == kNever || shadow <= s.now_us) return;
  PlaceBehindHeads(s, w, s.ClassOf(s.reservation.task), [&](TaskRef r) {
    const int64_t limit = s.SpecOf(r).timeout.count();
    return limit > 0 && s.now_us + limit <= shadow;
  });
}

void FillLeavingWorker(State& s, uint32_t w) {
  PlaceBehindHeads(s, w, kNone, [&](TaskRef r) { return LastsFor(s, w, r, s.now_us); });
}

void PlaceBehindHeads(State& s, uint32_t w, uint32_t skip,
                      const std::function<bool(TaskRef)>& pick) {
  const WorkerState& res = *s.workers[w].res;
  std::vector<std::pair<uint32_t, TaskRef>> picks;  // (class, task), in walk order
  for (const auto& key : s.queues.heads()) {
    const uint32_t cls = TaskQueues::ClassOfKey(key);
    if (cls == skip || !res.Fits(s.queues.request(cls), s.policy->PreferFullGpus())) continue;
    uint32_t seen = 0;
    s.queues.ForEach(cls, [&](const QueueEntry& e) {
      if (++seen > kBackfillScan) return false;
      const Task& t = s.task(e.task);
      if (t.state != TaskState::kQueued || t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked))
        return true;
      if (pick(e.task)) picks.emplace_back(cls, e.task);
      return true;
    });
  }
  for (const auto& [cls, r] : picks) {
    const Task& t = s.task(r);
    if (t.state != TaskState::kQueued || !QuotaAllows(s, r) || !CanPlace(s, w, r)) continue;
    TaskRef head;
    const bool is_head = LiveHead(s, cls, head) && head == r;
    if (!is_head) s.task(r).flags.Set(TaskFlag::kStaleEntry);  // its entry stays queued
    Place(s, cls, r, w, is_head);
  }
}

}  // namespace drover::core
