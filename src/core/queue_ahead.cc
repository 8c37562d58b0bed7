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

#include "core/scheduler_state.h"

namespace drover::core {

// --- queue-ahead ---------------------------------------------------------------

void Scheduler::State::NoteTail(uint32_t w) {
  if (!config.queue_ahead || workers[w].in_tails) return;
  workers[w].in_tails = true;
  queue_ahead.tail_workers.push_back(w);
}

uint32_t Scheduler::State::FindTail(uint32_t w, const ResourceRequest& req) const {
  if (!Queueable(req)) return kNone;
  const uint32_t cores = req.CoreCount();
  uint32_t best = kNone;
  for (uint32_t a : workers[w].actives) {
    const Active& act = actives[a];
    if (!IsTail(act) || RequestOf(act.task).IsCoreShare()) continue;  // a shared core
    // A victim's room goes to its preemptor.
    if (task(act.task).flags.Has(TaskFlag::kPreempted)) continue;
    if (act.alloc.cores.size() < cores || act.alloc.mem_bytes < req.mem_bytes) continue;
    // The one running longest first: the likeliest to end first.
    const Task& t = task(act.task);
    if (best == kNone) {
      best = a;
      continue;
    }
    const Task& b = task(actives[best].task);
    const bool running = t.state == TaskState::kRunning;
    const bool best_running = b.state == TaskState::kRunning;
    if (running != best_running ? running : (running && t.started_us < b.started_us)) best = a;
  }
  return best;
}

bool Scheduler::State::HasTail(uint32_t w) const {
  for (uint32_t a : workers[w].actives) {
    if (IsTail(actives[a])) return true;
  }
  return false;
}

bool Scheduler::State::QueueAhead(uint32_t w) {
  // A worker that leaves takes nothing to start later: when the task ahead
  // ends is not known well enough to promise the end.
  if (!Schedulable(w) || Ending(w)) return false;
  // The reserved worker drains for its task, and so does one held for a
  // preemptor; it is offered again (and looked at here) when that ends.
  if (reservation.IsOn(w) || preemption.On(w) != nullptr) return HasTail(w);
  WalkHeads([&](uint32_t cls, TaskRef r) {
    const ResourceRequest& req = RequestOf(r);
    if (!CanEverRun(w, r)) return Walk::kNext;  // not for this worker
    if (CanPlace(w, r)) {  // room freed meanwhile: r is the first head for it
      Place(cls, r, w);
      return Walk::kRestart;
    }
    if (preemption.For(r) != nullptr) return Walk::kNext;  // it starts where it preempts
    const uint32_t prev = FindTail(w, req);
    if (prev == kNone) {
      Displace(r);
      return Walk::kStop;  // r goes first here: nothing overtakes it
    }
    PlaceBehind(cls, r, prev);
    return Walk::kRestart;
  });
  return HasTail(w);
}

void Scheduler::State::QueueAheadAnywhere() {
  if (adoption.settling) return;
  std::vector<uint32_t> ws;
  ws.swap(queue_ahead.tail_workers);
  for (uint32_t w : ws) workers[w].in_tails = false;
  for (uint32_t w : ws) {
    if (QueueAhead(w)) NoteTail(w);
  }
}

void Scheduler::State::PlaceBehind(uint32_t cls, TaskRef r, uint32_t p) {
  const ResourceRequest& req = queues.request(cls);
  const uint32_t w = actives[p].worker;
  Task& t = task(r);
  const uint64_t seq = queues.Head(cls).seq;
  queues.PopHead(cls);
  ++t.attempt;
  t.worker = workers[w].id;
  const uint32_t a = NewActive(r, w, t.attempt);  // may move `actives`
  Active& act = actives[a];
  Active& prev = actives[p];
  act.alloc.cores.assign(prev.alloc.cores.begin(), prev.alloc.cores.begin() + req.CoreCount());
  act.alloc.mem_bytes = req.mem_bytes;
  LinkBehind(a, p, seq);
  if (reservation.IsFor(r)) EndReservation();
  out->emplace_back(std::in_place_type<ClaimLeases>, IdOf(r), uint32_t{t.attempt}, workers[w].id,
                    KeysOf(act), config.lease_ttl);
  Transition(r, TaskState::kAssigned);
}

void Scheduler::State::LinkBehind(uint32_t a, uint32_t prev, uint64_t seq) {
  Active& act = actives[a];
  act.prev = prev;
  act.wait_seq = seq;
  actives[prev].next = a;
  queue_ahead.AddWaiter(SpecOf(act.task).priority, seq, act.task, act.attempt);
}

// --- take-back -----------------------------------------------------------------

const TaskRef* Scheduler::State::HeldFor(uint32_t w) {
  auto it = queue_ahead.holds.find(w);
  if (it == queue_ahead.holds.end()) return nullptr;
  const Task& t = task(it->second);
  if (t.state == TaskState::kAssigned && t.flags.Has(TaskFlag::kWithdraw)) return &it->second;
  queue_ahead.holds.erase(it);  // ended otherwise (lost, canceled): nothing to wait for
  return nullptr;
}

bool Scheduler::State::HoldAllows(uint32_t w, TaskRef r) {
  const TaskRef* held = queue_ahead.holds.empty() ? nullptr : HeldFor(w);
  if (held == nullptr || *held == r) return true;
  return AfterPlacing(
      w, r, [&] { return workers[w].res->Fits(RequestOf(*held), policy->PreferFullGpus()); });
}

void Scheduler::State::DropHold(TaskRef r) {
  const uint32_t w = queue_ahead.EndHold(r);
  if (w != kNone && Schedulable(w)) MarkWorkerDirty(w);
}

void Scheduler::State::TakeBack(uint32_t w) {
  auto& waiters = queue_ahead.waiters;
  if (waiters.empty() || !Schedulable(w) || HeldFor(w) != nullptr) return;
  uint32_t looked = 0;
  for (auto it = waiters.begin(); it != waiters.end() && looked < kTakeBackScan;) {
    const auto [key, seq, r, attempt] = *it;
    const Task& t = task(r);
    if (t.state != TaskState::kAssigned || t.active == kNone ||
        actives[t.active].attempt != attempt || actives[t.active].prev == kNone) {
      it = waiters.erase(it);  // defensive: EndActive unlists them
      continue;
    }
    ++looked;
    if (!Movable(t) || !CanPlace(w, r)) {
      ++it;
      continue;
    }
    // A class head ahead of it in line that could ever run here goes first
    // (PlaceOnWorker places it, or holds the room for it): nothing is
    // overtaken. Heads behind it wait.
    bool head_first = false;
    WalkHeads([&](uint32_t cls, TaskRef head) {
      if (std::make_pair(-int64_t{SpecOf(head).priority}, queues.Head(cls).seq) >
          std::make_pair(key, seq)) {
        return Walk::kStop;
      }
      if (!CanEverRun(w, head)) return Walk::kNext;
      head_first = true;
      return Walk::kStop;
    });
    if (head_first) return;  // and so for every later waiter
    waiters.erase(it);
    Withdraw(r, why::RoomFreedOn(workers[w].id), w);
    return;
  }
}

bool Scheduler::State::Movable(const Task& t) const {
  const Active& act = actives[t.active];
  // Restored or adopted waiters stay: whether their assignment reached the
  // worker is not known here (granted says nothing for them).
  return !act.lost && act.wait_seq != UINT64_MAX &&
         !t.flags.Any(TaskFlag::kWithdraw | TaskFlag::kCancel | TaskFlag::kPreempted);
}

void Scheduler::State::Withdraw(TaskRef r, const Reason& why, uint32_t hold) {
  Task& t = task(r);
  const uint32_t a = t.active;
  Active& act = actives[a];
  if (!act.granted) {
    // Not sent to its worker yet: give the claim back and place it now.
    EmitRelease(act);
    EndActive(a);
    NeverStarted(r, why::MovedBeforeSent(why));
    return;
  }
  t.flags.Set(TaskFlag::kWithdraw);
  if (hold != kNone) queue_ahead.Hold(hold, r);
  out->push_back(KillTask{IdOf(r), act.attempt, workers[act.worker].id, why, /*hard=*/false,
                          /*only_queued=*/true});
}

void Scheduler::State::Displace(TaskRef r) {
  auto& waiters = queue_ahead.waiters;
  const ResourceRequest& req = RequestOf(r);
  if (waiters.empty() || !Queueable(req)) return;
  const int64_t key = -int64_t{SpecOf(r).priority};
  if (std::get<0>(*waiters.rbegin()) <= key) return;  // none of lower priority
  for (auto it = queue_ahead.displaced.begin(); it != queue_ahead.displaced.end();) {
    const Task& t = task(it->first);
    if (t.state != TaskState::kAssigned || !t.flags.Has(TaskFlag::kWithdraw)) {
      it = queue_ahead.displaced.erase(it);
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
    const Task& t = task(waiter);
    if (t.state != TaskState::kAssigned || t.active == kNone) continue;
    const Active& act = actives[t.active];
    if (act.attempt != attempt || act.prev == kNone || !Movable(t)) continue;
    const Active& prev = actives[act.prev];
    if (RequestOf(prev.task).IsCoreShare()) continue;
    const uint32_t w = prev.worker;
    if (w == kNone || !Schedulable(w) || reservation.IsOn(w) || preemption.On(w) != nullptr) {
      continue;
    }
    if (prev.alloc.cores.size() < req.CoreCount() || prev.alloc.mem_bytes < req.mem_bytes ||
        !CanEverRun(w, r)) {
      continue;
    }
    Withdraw(waiter, why::DisplacedBy(IdOf(r), SpecOf(r).priority), kNone);
    if (task(waiter).flags.Has(TaskFlag::kWithdraw)) queue_ahead.displaced[waiter] = r;
    return;
  }
}

}  // namespace drover::core
