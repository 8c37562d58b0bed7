// Queue-ahead (queue_ahead.h): placing a class head behind an attempt on a
// worker, and taking a waiter back when room for it frees elsewhere first
// (TakeBack) or a head of higher priority needs its place (Displace).
//
// A head that fits no free room may be assigned behind a running task whose
// cores and memory cover it; the worker starts it when that one exits. Only
// the first head that could ever run on a worker may queue there, so
// nothing is overtaken, and never on the reserved worker, so a
// reservation's room drains. A waiter is taken back when another worker
// frees room for it first (TakeBack): it does not wait for a long
// predecessor while the cluster has room; and when a head of higher
// priority could take its place (Displace): queue-ahead never lets a lower
// priority start first.
#include <algorithm>

#include "core/attempt_events_ops.h"
#include "core/dispatch_ops.h"
#include "core/leases_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

// --- queue-ahead ---------------------------------------------------------------

void NoteTail(State& s, uint32_t w) {
  if (!s.config.queue_ahead || s.workers[w].in_tails) return;
  s.workers[w].in_tails = true;
  s.queue_ahead.tail_workers.push_back(w);
}

uint32_t FindTail(const State& s, uint32_t w, const ResourceRequest& req) {
  if (!Queueable(req)) return kNone;
  const uint32_t cores = req.CoreCount();
  uint32_t best = kNone;
  for (uint32_t a : s.workers[w].actives) {
    const Active& act = s.actives[a];
    if (!IsTail(act) || s.RequestOf(act.task).IsCoreShare()) continue;  // a shared core
    // A victim's room goes to its preemptor.
    if (s.task(act.task).flags.Has(TaskFlag::kPreempted)) continue;
    if (act.alloc.cores.size() < cores || act.alloc.mem_bytes < req.mem_bytes) continue;
    // The one running longest first: the likeliest to end first.
    const Task& t = s.task(act.task);
    if (best == kNone) {
      best = a;
      continue;
    }
    const Task& b = s.task(s.actives[best].task);
    const bool running = t.state == TaskState::kRunning;
    const bool best_running = b.state == TaskState::kRunning;
    if (running != best_running ? running : (running && t.started_us < b.started_us)) best = a;
  }
  return best;
}

bool HasTail(const State& s, uint32_t w) {
  for (uint32_t a : s.workers[w].actives) {
    if (IsTail(s.actives[a])) return true;
  }
  return false;
}

bool QueueAhead(State& s, uint32_t w) {
  // A worker that leaves takes nothing to start later: when the task ahead
  // ends is not known well enough to promise the end.
  if (!Schedulable(s, w) || Ending(s, w)) return false;
  // The reserved worker drains for its task, and so does one held for a
  // preemptor; it is offered again (and looked at here) when that ends.
  if (s.reservation.IsOn(w) || s.preemption.On(w) != nullptr) return HasTail(s, w);
  WalkHeads(s, [&](uint32_t cls, TaskRef r) {
    const ResourceRequest& req = s.RequestOf(r);
    if (!CanEverRun(s, w, r)) return Walk::kNext;  // not for this worker
    if (CanPlace(s, w, r)) {  // room freed meanwhile: r is the first head for it
      Place(s, cls, r, w);
      return Walk::kRestart;
    }
    if (s.preemption.For(r) != nullptr) return Walk::kNext;  // it starts where it preempts
    const uint32_t prev = FindTail(s, w, req);
    if (prev == kNone) {
      Displace(s, r);
      return Walk::kStop;  // r goes first here: nothing overtakes it
    }
    PlaceBehind(s, cls, r, prev);
    return Walk::kRestart;
  });
  return HasTail(s, w);
}

void QueueAheadAnywhere(State& s) {
  if (s.adoption.settling) return;
  std::vector<uint32_t> ws;
  ws.swap(s.queue_ahead.tail_workers);
  for (uint32_t w : ws) s.workers[w].in_tails = false;
  for (uint32_t w : ws) {
    if (QueueAhead(s, w)) NoteTail(s, w);
  }
}

void PlaceBehind(State& s, uint32_t cls, TaskRef r, uint32_t p) {
  const ResourceRequest& req = s.queues.request(cls);
  const uint32_t w = s.actives[p].worker;
  Task& t = s.task(r);
  const uint64_t seq = s.queues.Head(cls).seq;
  s.queues.PopHead(cls);
  ++t.attempt;
  t.worker = s.workers[w].id;
  const uint32_t a = NewActive(s, r, w, t.attempt);  // may move `actives`
  Active& act = s.actives[a];
  Active& prev = s.actives[p];
  act.alloc.cores.assign(prev.alloc.cores.begin(), prev.alloc.cores.begin() + req.CoreCount());
  act.alloc.mem_bytes = req.mem_bytes;
  LinkBehind(s, a, p, seq);
  if (s.reservation.IsFor(r)) EndReservation(s);
  s.out->emplace_back(std::in_place_type<ClaimLeases>, s.IdOf(r), uint32_t{t.attempt},
                      s.workers[w].id, KeysOf(s, act), s.config.lease_ttl);
  Transition(s, r, TaskState::kAssigned);
}

void LinkBehind(State& s, uint32_t a, uint32_t prev, uint64_t seq) {
  Active& act = s.actives[a];
  act.prev = prev;
  act.wait_seq = seq;
  s.actives[prev].next = a;
  s.queue_ahead.AddWaiter(s.SpecOf(act.task).priority, seq, act.task, act.attempt);
}

// --- take-back -----------------------------------------------------------------

const TaskRef* HeldFor(State& s, uint32_t w) {
  auto it = s.queue_ahead.holds.find(w);
  if (it == s.queue_ahead.holds.end()) return nullptr;
  const Task& t = s.task(it->second);
  if (t.state == TaskState::kAssigned && t.flags.Has(TaskFlag::kWithdraw)) return &it->second;
  s.queue_ahead.holds.erase(it);  // ended otherwise (lost, canceled): nothing to wait for
  return nullptr;
}

bool HoldAllows(State& s, uint32_t w, TaskRef r) {
  const TaskRef* held = s.queue_ahead.holds.empty() ? nullptr : HeldFor(s, w);
  if (held == nullptr || *held == r) return true;
  return AfterPlacing(s, w, r, [&] {
    return s.workers[w].res->Fits(s.RequestOf(*held), s.policy->PreferFullGpus());
  });
}

void DropHold(State& s, TaskRef r) {
  const uint32_t w = s.queue_ahead.EndHold(r);
  if (w != kNone && Schedulable(s, w)) MarkWorkerDirty(s, w);
}

void TakeBack(State& s, uint32_t w) {
  auto& waiters = s.queue_ahead.waiters;
  if (waiters.empty() || !Schedulable(s, w) || HeldFor(s, w) != nullptr) return;
  uint32_t looked = 0;
  for (auto it = waiters.begin(); it != waiters.end() && looked < kTakeBackScan;) {
    const auto [key, seq, r, attempt] = *it;
    const Task& t = s.task(r);
    if (t.state != TaskState::kAssigned || t.active == kNone ||
        s.actives[t.active].attempt != attempt || s.actives[t.active].prev == kNone) {
      it = waiters.erase(it);  // defensive: EndActive unlists them
      continue;
    }
    ++looked;
    if (!Movable(s, t) || !CanPlace(s, w, r)) {
      ++it;
      continue;
    }
    // A class head ahead of it in line that could ever run here goes first
    // (PlaceOnWorker places it, or holds the room for it): nothing is
    // overtaken. Heads behind it wait.
    bool head_first = false;
    WalkHeads(s, [&](uint32_t cls, TaskRef head) {
      if (std::make_pair(-int64_t{s.SpecOf(head).priority}, s.queues.Head(cls).seq) >
          std::make_pair(key, seq)) {
        return Walk::kStop;
      }
      if (!CanEverRun(s, w, head)) return Walk::kNext;
      head_first = true;
      return Walk::kStop;
    });
    if (head_first) return;  // and so for every later waiter
    waiters.erase(it);
    Withdraw(s, r, why::RoomFreedOn(s.workers[w].id), w);
    return;
  }
}

bool Movable(const State& s, const Task& t) {
  const Active& act = s.actives[t.active];
  // Restored or adopted waiters stay: whether their assignment reached the
  // worker is not known here (granted says nothing for them).
  return !act.lost && act.wait_seq != UINT64_MAX &&
         !t.flags.Any(TaskFlag::kWithdraw | TaskFlag::kCancel | TaskFlag::kPreempted);
}

void Withdraw(State& s, TaskRef r, const Reason& why, uint32_t hold) {
  Task& t = s.task(r);
  const uint32_t a = t.active;
  Active& act = s.actives[a];
  if (!act.granted) {
    // Not sent to its worker yet: give the claim back and place it now.
    EmitRelease(s, act);
    EndActive(s, a);
    NeverStarted(s, r, why::MovedBeforeSent(why));
    return;
  }
  t.flags.Set(TaskFlag::kWithdraw);
  if (hold != kNone) s.queue_ahead.Hold(hold, r);
  s.out->push_back(KillTask{s.IdOf(r), act.attempt, s.workers[act.worker].id, why, /*hard=*/false,
                            /*only_queued=*/true});
}

void Displace(State& s, TaskRef r) {
  auto& waiters = s.queue_ahead.waiters;
  const ResourceRequest& req = s.RequestOf(r);
  if (waiters.empty() || !Queueable(req)) return;
  const int64_t key = -int64_t{s.SpecOf(r).priority};
  if (std::get<0>(*waiters.rbegin()) <= key) return;  // none of lower priority
  for (auto it = s.queue_ahead.displaced.begin(); it != s.queue_ahead.displaced.end();) {
    const Task& t = s.task(it->first);
    if (t.state != TaskState::kAssigned || !t.flags.Has(TaskFlag::kWithdraw)) {
      it = s.queue_ahead.displaced.erase(it);
      continue;
    }
    if (it->second == r) return;  // one is already making way for r
    ++it;
  }
  uint32_t looked = 0;
  for (auto it = waiters.rbegin(); it != waiters.rend() && looked < kTakeBackScan; ++it) {
    const auto [wkey, seq, waiter, attempt] = *it;
    if (wkey <= key) return;  // from here on, none of lower priority
    ++looked;
    const Task& t = s.task(waiter);
    if (t.state != TaskState::kAssigned || t.active == kNone) continue;
    const Active& act = s.actives[t.active];
    if (act.attempt != attempt || act.prev == kNone || !Movable(s, t)) continue;
    const Active& prev = s.actives[act.prev];
    if (s.RequestOf(prev.task).IsCoreShare()) continue;
    const uint32_t w = prev.worker;
    if (w == kNone || !Schedulable(s, w) || s.reservation.IsOn(w) ||
        s.preemption.On(w) != nullptr) {
      continue;
    }
    if (prev.alloc.cores.size() < req.CoreCount() || prev.alloc.mem_bytes < req.mem_bytes ||
        !CanEverRun(s, w, r)) {
      continue;
    }
    Withdraw(s, waiter, why::DisplacedBy(s.IdOf(r), s.SpecOf(r).priority), kNone);
    if (s.task(waiter).flags.Has(TaskFlag::kWithdraw)) s.queue_ahead.displaced[waiter] = r;
    return;
  }
}

}  // namespace drover::core
