// Placement: turning free resources and ready tasks into claims.
//
// Two paths, both bounded:
//  - a class with new ready tasks is placed by asking the policy for the
//    preferred worker that fits its head, repeatedly, until one does not fit
//    (PlaceClass);
//  - a worker whose resources were freed is offered to the class heads in
//    priority-then-FIFO order (PlaceOnWorker). A queued class head fits no
//    other worker (it was tried when it arrived, and every free since then
//    was offered to it), so only the worker that changed needs a look.
//
// Backfill and reservations (reservation.h, reservation.cc): when a later
// head is placed on a worker where an earlier head did not fit, the earlier
// one is being overtaken. It then gets a reservation on a worker that can
// hold it; on that worker no other task may take anything the reserved one
// is short of, or make it short of something more, so a stream of small
// tasks cannot starve a large one.
//
// Queue-ahead (SchedulerConfig::queue_ahead; queue_ahead.h, queue_ahead.cc):
// a head that fits no free room may be assigned behind a running task whose
// cores and memory cover it, and a waiter may be taken back when room for
// it frees elsewhere first.
//
// Preemption (SchedulerConfig::preempt_priority; preemption.h,
// preemption.cc): a head of high priority that fits no worker stops tasks
// of lower priority on one worker, which is held for it until they end.
#include <algorithm>

#include "core/attempt_events_ops.h"
#include "core/dispatch_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/leases_ops.h"
#include "core/locality_ops.h"
#include "core/preemption_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

void MarkClassDirty(State& s, uint32_t cls) {
  if (s.class_dirty.size() <= cls) s.class_dirty.resize(s.queues.class_count(), 0);
  if (s.class_dirty[cls]) return;
  s.class_dirty[cls] = 1;
  s.dirty_classes.push_back(cls);
}

void Dispatch(State& s) {
  if (s.adoption.settling) {  // after a restore: dirty classes/workers wait for EndSettle
    FlushLoads(s);
    return;
  }
  for (;;) {
    while (!s.dirty_classes.empty() || !s.dirty_workers.empty()) {
      if (!s.dirty_classes.empty()) {
        // Class order, not arrival order, so the result does not depend on
        // which event touched which class first within one handling.
        std::vector<uint32_t> classes;
        classes.swap(s.dirty_classes);
        std::sort(classes.begin(), classes.end());
        for (uint32_t cls : classes) {
          s.class_dirty[cls] = 0;
          PlaceClass(s, cls);
        }
        continue;
      }
      std::vector<uint32_t> ws;
      ws.swap(s.dirty_workers);
      for (uint32_t w : ws) {
        s.workers[w].dirty = false;
        PlaceOnWorker(s, w);
      }
      ws.clear();
      if (s.dirty_workers.empty()) s.dirty_workers.swap(ws);  // keep the capacity
    }
    // After placement, so only heads that still fit nowhere preempt.
    if (!s.preempt_due) break;
    s.preempt_due = false;
    PreemptBlockedHeads(s);
  }
  FlushLoads(s);
}

bool LiveHead(State& s, uint32_t cls, TaskRef& out_ref) {
  while (!s.queues.Empty(cls)) {
    TaskRef r = s.queues.Head(cls).task;
    const Task& t = s.task(r);
    if (t.state == TaskState::kQueued && !t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked)) {
      out_ref = r;
      return true;
    }
    // Canceled or moved on since it was queued; a task placed past the heads
    // (BackfillBehindHeads) has no other entry left.
    if (t.flags.Has(TaskFlag::kStaleEntry)) s.task(r).flags.Clear(TaskFlag::kStaleEntry);
    s.queues.PopHead(cls);
  }
  return false;
}

bool QuotaAllows(const State& s, TaskRef r) {
  return s.users[s.jobs[r.job].user].account.Exceeds(s.RequestOf(r)) == QuotaLimit::kNone;
}

void Park(State& s, uint32_t cls, TaskRef r) {
  s.queues.PopHead(cls);
  // A parked task is no class head: it must not hold resources back.
  if (s.reservation.IsFor(r)) EndReservation(s);
  EndPreemption(s, r);
  s.task(r).flags.Set(TaskFlag::kParked);
  s.users[s.jobs[r.job].user].parked.push_back(r);
}

void Unpark(State& s, uint32_t u) {
  // Put back, in order, as many parked tasks as the freed quota could take;
  // the rest stay parked so a long parked list costs nothing per event.
  User& user = s.users[u];
  QuotaUsage usage = user.account.used();  // with the tasks taken back so far
  std::vector<TaskRef> back;
  while (!user.parked.empty()) {
    TaskRef r = user.parked.front();
    Task& t = s.task(r);
    if (t.state != TaskState::kQueued || !t.flags.Has(TaskFlag::kParked)) {
      user.parked.pop_front();
      continue;
    }
    const ResourceRequest& req = s.RequestOf(r);
    if (user.account.Exceeds(req, usage) != QuotaLimit::kNone) break;
    usage.Add(req);
    t.flags.Clear(TaskFlag::kParked);
    back.push_back(r);
    user.parked.pop_front();
  }
  for (auto it = back.rbegin(); it != back.rend(); ++it) {
    if (s.task(*it).state != TaskState::kQueued) {
      // Queuing one before it reran a producer this one needs too
      // (lineage.cc): it waits, and has no queue entry for Unready to keep.
      s.task(*it).flags.Clear(TaskFlag::kStaleEntry);
      continue;
    }
    Enqueue(s, *it, true);
  }
}

bool LastsFor(const State& s, uint32_t w, TaskRef r, int64_t from_us) {
  return s.workers[w].res->resources().EndsInTime(s.SpecOf(r).timeout, TimeFromMicros(from_us));
}

bool CanPlace(State& s, uint32_t w, TaskRef r) {
  if (!Schedulable(s, w) || (s.workers[w].ending && !LastsFor(s, w, r, s.now_us))) return false;
  const ResourceRequest& req = s.RequestOf(r);
  if (!s.workers[w].res->Fits(req, s.policy->PreferFullGpus())) return false;
  // Nothing held for a preemptor (always, with preemption off): no call.
  if (!s.preemption.in_flight.empty() && !PreemptionAllows(s, w, r)) return false;
  if (s.reservation.IsOn(w) && !(s.reservation.task == r)) {
    // A task of the reserved one's own class asked here is its class head,
    // so it is ahead of the reserved task (a higher priority arrived, or it
    // was put back at the front): it may take what is held for that shape.
    // Holding it back too would idle the worker until the reserved task is
    // head again, and no free on this worker may follow to offer it then.
    if (s.ClassOf(r) == s.ClassOf(s.reservation.task)) return HoldAllows(s, w, r);
    if (!ReservationAllows(s, w, r)) return false;
  }
  return HoldAllows(s, w, r);
}

void Place(State& s, uint32_t cls, TaskRef r, uint32_t w, bool head) {
  const ResourceRequest& req = s.queues.request(cls);
  Worker& worker = s.workers[w];
  Task& t = s.task(r);
  if (head) s.queues.PopHead(cls);
  ++t.attempt;
  t.worker = worker.id;
  const uint32_t a = NewActive(s, r, w, t.attempt);
  Active& act = s.actives[a];
  act.booked = worker.res->Allocate(req, s.policy->PreferFullGpus(), act.alloc);
  if (s.reservation.IsFor(r)) EndReservation(s);
  // Built from its fields: emplacing with no arguments would zero it first.
  s.out->emplace_back(std::in_place_type<ClaimLeases>, s.IdOf(r), uint32_t{t.attempt}, worker.id,
                      KeysOf(s, act), s.config.lease_ttl);
  Transition(s, r, TaskState::kAssigned);
}

void PlaceClass(State& s, uint32_t cls) {
  TaskRef r;
  while (LiveHead(s, cls, r)) {
    if (!QuotaAllows(s, r)) {
      Park(s, cls, r);
      continue;
    }
    FlushLoads(s);
    uint32_t w = s.policy->Choose([&](uint32_t slot) { return CanPlace(s, slot, r); });
    if (w != kNoWorker) w = NearInputs(s, r, w);
    if (w == kNoWorker) {
      // The head waits; a worker that leaves may still take tasks behind it.
      for (uint32_t e : s.ending_workers) {
        if (Schedulable(s, e)) MarkWorkerDirty(s, e);
      }
      // Before queue-ahead: a task that may preempt starts where its
      // victims end rather than waiting behind a task of any length.
      const bool preempting = Preempt(s, r);
      if (s.config.queue_ahead) {
        QueueAheadAnywhere(s);
        TaskRef still;
        if (!preempting && LiveHead(s, cls, still) && still == r) Displace(s, r);
      }
      return;
    }
    // Overtaking an earlier blocked head of another class is a backfill.
    if (!s.queues.heads().empty()) {
      const uint32_t top = TaskQueues::ClassOfKey(*s.queues.heads().begin());
      TaskRef first;
      if (top != cls && LiveHead(s, top, first)) {
        if (*s.queues.heads().begin() < s.queues.HeadKeyOf(cls)) {
          Reserve(s, first, kNone);
          if (!CanPlace(s, w, r)) continue;  // the reservation just took that worker
        }
      }
    }
    Place(s, cls, r, w);
  }
}

void PlaceOnWorker(State& s, uint32_t w) {
  if (!Schedulable(s, w)) return;
  if (s.config.queue_ahead) TakeBack(s, w);
  TaskRef blocked;
  bool have_blocked = false;
  WalkHeads(s, [&](uint32_t cls, TaskRef r) {
    if (CanPlace(s, w, r)) {
      if (have_blocked && !(blocked == r)) {
        Reserve(s, blocked, w);
        if (!CanPlace(s, w, r)) return Walk::kNext;
      }
      Place(s, cls, r, w);
      return Walk::kRestart;
    }
    if (!have_blocked && CanEverRun(s, w, r)) {
      blocked = r;
      have_blocked = true;
    }
    return Walk::kNext;
  });
  if (s.reservation.IsOn(w)) BackfillBehindHeads(s, w);
  if (Ending(s, w)) FillLeavingWorker(s, w);
  if (s.config.queue_ahead) QueueAhead(s, w);
  if (!s.preemption.in_flight.empty()) SettlePreemption(s, w);
}

}  // namespace drover::core
