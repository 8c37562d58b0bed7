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

#include "core/scheduler_state.h"

namespace drover::core {

void Scheduler::State::MarkClassDirty(uint32_t cls) {
  if (class_dirty.size() <= cls) class_dirty.resize(queues.class_count(), 0);
  if (class_dirty[cls]) return;
  class_dirty[cls] = 1;
  dirty_classes.push_back(cls);
}

void Scheduler::State::Dispatch() {
  if (adoption.settling) {  // after a restore: dirty classes/workers wait for EndSettle
    FlushLoads();
    return;
  }
  for (;;) {
    while (!dirty_classes.empty() || !dirty_workers.empty()) {
      if (!dirty_classes.empty()) {
        // Class order, not arrival order, so the result does not depend on
        // which event touched which class first within one handling.
        std::vector<uint32_t> classes;
        classes.swap(dirty_classes);
        std::sort(classes.begin(), classes.end());
        for (uint32_t cls : classes) {
          class_dirty[cls] = 0;
          PlaceClass(cls);
        }
        continue;
      }
      std::vector<uint32_t> ws;
      ws.swap(dirty_workers);
      for (uint32_t w : ws) {
        workers[w].dirty = false;
        PlaceOnWorker(w);
      }
      ws.clear();
      if (dirty_workers.empty()) dirty_workers.swap(ws);  // keep the capacity
    }
    // After placement, so only heads that still fit nowhere preempt.
    if (!preempt_due) break;
    preempt_due = false;
    PreemptBlockedHeads();
  }
  FlushLoads();
}

bool Scheduler::State::LiveHead(uint32_t cls, TaskRef& out_ref) {
  while (!queues.Empty(cls)) {
    TaskRef r = queues.Head(cls).task;
    const Task& t = task(r);
    if (t.state == TaskState::kQueued && !t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked)) {
      out_ref = r;
      return true;
    }
    // Canceled or moved on since it was queued; a task placed past the heads
    // (BackfillBehindHeads) has no other entry left.
    if (t.flags.Has(TaskFlag::kStaleEntry)) task(r).flags.Clear(TaskFlag::kStaleEntry);
    queues.PopHead(cls);
  }
  return false;
}

bool Scheduler::State::QuotaAllows(TaskRef r) const {
  return users[jobs[r.job].user].account.Exceeds(RequestOf(r)) == QuotaLimit::kNone;
}

void Scheduler::State::Park(uint32_t cls, TaskRef r) {
  queues.PopHead(cls);
  // A parked task is no class head: it must not hold resources back.
  if (reservation.IsFor(r)) EndReservation();
  EndPreemption(r);
  task(r).flags.Set(TaskFlag::kParked);
  users[jobs[r.job].user].parked.push_back(r);
}

void Scheduler::State::Unpark(uint32_t u) {
  // Put back, in order, as many parked tasks as the freed quota could take;
  // the rest stay parked so a long parked list costs nothing per event.
  User& user = users[u];
  QuotaUsage usage = user.account.used();  // with the tasks taken back so far
  std::vector<TaskRef> back;
  while (!user.parked.empty()) {
    TaskRef r = user.parked.front();
    Task& t = task(r);
    if (t.state != TaskState::kQueued || !t.flags.Has(TaskFlag::kParked)) {
      user.parked.pop_front();
      continue;
    }
    const ResourceRequest& req = RequestOf(r);
    if (user.account.Exceeds(req, usage) != QuotaLimit::kNone) break;
    usage.Add(req);
    t.flags.Clear(TaskFlag::kParked);
    back.push_back(r);
    user.parked.pop_front();
  }
  for (auto it = back.rbegin(); it != back.rend(); ++it) {
    if (task(*it).state != TaskState::kQueued) {
      // Queuing one before it reran a producer this one needs too
      // (lineage.cc): it waits, and has no queue entry for Unready to keep.
      task(*it).flags.Clear(TaskFlag::kStaleEntry);
      continue;
    }
    Enqueue(*it, true);
  }
}

bool Scheduler::State::LastsFor(uint32_t w, TaskRef r, int64_t from_us) const {
  return workers[w].res->resources().EndsInTime(SpecOf(r).timeout, TimeFromMicros(from_us));
}

bool Scheduler::State::CanPlace(uint32_t w, TaskRef r) {
  if (!Schedulable(w) || (workers[w].ending && !LastsFor(w, r, now_us))) return false;
  const ResourceRequest& req = RequestOf(r);
  if (!workers[w].res->Fits(req, policy->PreferFullGpus())) return false;
  // Nothing held for a preemptor (always, with preemption off): no call.
  if (!preemption.in_flight.empty() && !PreemptionAllows(w, r)) return false;
  if (reservation.IsOn(w) && !(reservation.task == r)) {
    // A task of the reserved one's own class asked here is its class head,
    // so it is ahead of the reserved task (a higher priority arrived, or it
    // was put back at the front): it may take what is held for that shape.
    // Holding it back too would idle the worker until the reserved task is
    // head again, and no free on this worker may follow to offer it then.
    if (ClassOf(r) == ClassOf(reservation.task)) return HoldAllows(w, r);
    if (!ReservationAllows(w, r)) return false;
  }
  return HoldAllows(w, r);
}

void Scheduler::State::Place(uint32_t cls, TaskRef r, uint32_t w, bool head) {
  const ResourceRequest& req = queues.request(cls);
  Worker& worker = workers[w];
  Task& t = task(r);
  if (head) queues.PopHead(cls);
  ++t.attempt;
  t.worker = worker.id;
  const uint32_t a = NewActive(r, w, t.attempt);
  Active& act = actives[a];
  act.booked = worker.res->Allocate(req, policy->PreferFullGpus(), act.alloc);
  if (reservation.IsFor(r)) EndReservation();
  // Built from its fields: emplacing with no arguments would zero it first.
  out->emplace_back(std::in_place_type<ClaimLeases>, IdOf(r), uint32_t{t.attempt}, worker.id,
                    KeysOf(act), config.lease_ttl);
  Transition(r, TaskState::kAssigned);
}

void Scheduler::State::PlaceClass(uint32_t cls) {
  TaskRef r;
  while (LiveHead(cls, r)) {
    if (!QuotaAllows(r)) {
      Park(cls, r);
      continue;
    }
    FlushLoads();
    uint32_t w = policy->Choose([&](uint32_t slot) { return CanPlace(slot, r); });
    if (w != kNoWorker) w = NearInputs(r, w);
    if (w == kNoWorker) {
      // The head waits; a worker that leaves may still take tasks behind it.
      for (uint32_t e : ending_workers) {
        if (Schedulable(e)) MarkWorkerDirty(e);
      }
      // Before queue-ahead: a task that may preempt starts where its
      // victims end rather than waiting behind a task of any length.
      const bool preempting = Preempt(r);
      if (config.queue_ahead) {
        QueueAheadAnywhere();
        TaskRef still;
        if (!preempting && LiveHead(cls, still) && still == r) Displace(r);
      }
      return;
    }
    // Overtaking an earlier blocked head of another class is a backfill.
    if (!queues.heads().empty()) {
      const uint32_t top = TaskQueues::ClassOfKey(*queues.heads().begin());
      TaskRef first;
      if (top != cls && LiveHead(top, first)) {
        if (*queues.heads().begin() < queues.HeadKeyOf(cls)) {
          Reserve(first, kNone);
          if (!CanPlace(w, r)) continue;  // the reservation just took that worker
        }
      }
    }
    Place(cls, r, w);
  }
}

void Scheduler::State::PlaceOnWorker(uint32_t w) {
  if (!Schedulable(w)) return;
  if (config.queue_ahead) TakeBack(w);
  TaskRef blocked;
  bool have_blocked = false;
  WalkHeads([&](uint32_t cls, TaskRef r) {
    if (CanPlace(w, r)) {
      if (have_blocked && !(blocked == r)) {
        Reserve(blocked, w);
        if (!CanPlace(w, r)) return Walk::kNext;
      }
      Place(cls, r, w);
      return Walk::kRestart;
    }
    if (!have_blocked && CanEverRun(w, r)) {
      blocked = r;
      have_blocked = true;
    }
    return Walk::kNext;
  });
  if (reservation.IsOn(w)) BackfillBehindHeads(w);
  if (Ending(w)) FillLeavingWorker(w);
  if (config.queue_ahead) QueueAhead(w);
  if (!preemption.in_flight.empty()) SettlePreemption(w);
}

}  // namespace drover::core
