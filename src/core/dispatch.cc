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
// Queue-ahead (SchedulerConfig::queue_ahead): a head that fits no free room
// may be assigned behind a running task whose cores and memory cover it; the
// worker starts it when that one exits. Only the first head that could ever
// run on a worker may queue there, so nothing is overtaken, and never on the
// reserved worker, so a reservation's room drains. A waiter is taken back
// when another worker frees room for it first (TakeBack): it does not wait
// for a long predecessor while the cluster has room; and when a head of
// higher priority could take its place (Displace): queue-ahead never lets a
// lower priority start first.
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
  if (settling) {  // after a restore: dirty classes/workers wait for EndSettle
    FlushLoads();
    return;
  }
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
  for (auto it = back.rbegin(); it != back.rend(); ++it) Enqueue(*it, true);
}

bool Scheduler::State::CanPlace(uint32_t w, TaskRef r) {
  if (!Schedulable(w)) return false;
  const ResourceRequest& req = RequestOf(r);
  if (!workers[w].res->Fits(req, policy->PreferFullGpus())) return false;
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
  Transition(r, TaskState::kAssigned, "");
}

void Scheduler::State::PlaceClass(uint32_t cls) {
  TaskRef r;
  while (LiveHead(cls, r)) {
    if (!QuotaAllows(r)) {
      Park(cls, r);
      continue;
    }
    FlushLoads();
    const uint32_t w = policy->Choose([&](uint32_t slot) { return CanPlace(slot, r); });
    if (w == kNoWorker) {
      if (config.queue_ahead) {
        QueueAheadAnywhere();
        TaskRef still;
        if (LiveHead(cls, still) && still == r) Displace(r);
      }
      return;
    }
    // Overtaking an earlier blocked head of another class is a backfill.
    if (!queues.heads().empty()) {
      const uint32_t top = std::get<2>(*queues.heads().begin());
      TaskRef first;
      if (top != cls && LiveHead(top, first)) {
        const auto& [np, seq, c] = *queues.heads().begin();
        const auto& mine = queues.Head(cls);
        if (std::make_pair(np, seq) < std::make_pair(-int64_t{SpecOf(r).priority}, mine.seq)) {
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
    if (!have_blocked && workers[w].res->CanEverFit(RequestOf(r))) {
      blocked = r;
      have_blocked = true;
    }
    return Walk::kNext;
  });
  if (reservation.IsOn(w)) BackfillBehindHeads(w);
  if (config.queue_ahead) QueueAhead(w);
}

// --- queue-ahead take-back ------------------------------------------------------

void Scheduler::State::LinkBehind(uint32_t a, uint32_t prev, uint64_t seq) {
  Active& act = actives[a];
  act.prev = prev;
  act.wait_seq = seq;
  actives[prev].next = a;
  waiters.emplace(-int64_t{SpecOf(act.task).priority}, seq, act.task, act.attempt);
}

const TaskRef* Scheduler::State::HeldFor(uint32_t w) {
  auto it = holds.find(w);
  if (it == holds.end()) return nullptr;
  const Task& t = task(it->second);
  if (t.state == TaskState::kAssigned && t.flags.Has(TaskFlag::kWithdraw)) return &it->second;
  holds.erase(it);  // ended otherwise (lost, canceled): nothing to wait for
  return nullptr;
}

bool Scheduler::State::HoldAllows(uint32_t w, TaskRef r) {
  const TaskRef* held = holds.empty() ? nullptr : HeldFor(w);
  if (held == nullptr || *held == r) return true;
  return AfterPlacing(
      w, r, [&] { return workers[w].res->Fits(RequestOf(*held), policy->PreferFullGpus()); });
}

void Scheduler::State::DropHold(TaskRef r) {
  for (auto it = holds.begin(); it != holds.end(); ++it) {
    if (it->second == r) {
      const uint32_t w = it->first;
      holds.erase(it);
      if (Schedulable(w)) MarkWorkerDirty(w);
      return;
    }
  }
}

void Scheduler::State::TakeBack(uint32_t w) {
  if (waiters.empty() || !Schedulable(w) || HeldFor(w) != nullptr) return;
  const WorkerState& res = *workers[w].res;
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
      if (!res.CanEverFit(RequestOf(head))) return Walk::kNext;
      head_first = true;
      return Walk::kStop;
    });
    if (head_first) return;  // and so for every later waiter
    waiters.erase(it);
    Withdraw(r, "room freed first on worker " + std::to_string(workers[w].id), w);
    return;
  }
}

bool Scheduler::State::Movable(const Task& t) const {
  const Active& act = actives[t.active];
  // Restored or adopted waiters stay: whether their assignment reached the
  // worker is not known here (granted says nothing for them).
  return !act.lost && act.wait_seq != UINT64_MAX &&
         !t.flags.Any(TaskFlag::kWithdraw | TaskFlag::kCancel);
}

void Scheduler::State::Withdraw(TaskRef r, const std::string& why, uint32_t hold) {
  Task& t = task(r);
  const uint32_t a = t.active;
  Active& act = actives[a];
  if (!act.granted) {
    // Not sent to its worker yet: give the claim back and place it now.
    EmitRelease(act);
    EndActive(a);
    NeverStarted(r, "moved before it was sent: " + why);
    return;
  }
  t.flags.Set(TaskFlag::kWithdraw);
  if (hold != kNone) holds[hold] = r;
  out->push_back(KillTask{IdOf(r), act.attempt, workers[act.worker].id, why, /*hard=*/false,
                          /*only_queued=*/true});
}

void Scheduler::State::Displace(TaskRef r) {
  const ResourceRequest& req = RequestOf(r);
  if (waiters.empty() || !Queueable(req)) return;
  const int64_t key = -int64_t{SpecOf(r).priority};
  if (std::get<0>(*waiters.rbegin()) <= key) return;  // none of lower priority
  for (auto it = displaced.begin(); it != displaced.end();) {
    const Task& t = task(it->first);
    if (t.state != TaskState::kAssigned || !t.flags.Has(TaskFlag::kWithdraw)) {
      it = displaced.erase(it);
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
    if (w == kNone || !Schedulable(w) || (reservation.IsOn(w))) continue;
    if (prev.alloc.cores.size() < req.CoreCount() || prev.alloc.mem_bytes < req.mem_bytes ||
        !workers[w].res->CanEverFit(req)) {
      continue;
    }
    Withdraw(waiter, "task " + IdOf(r).ToString() + " of higher priority (" +
                         std::to_string(SpecOf(r).priority) + ") takes its place",
             kNone);
    if (task(waiter).flags.Has(TaskFlag::kWithdraw)) displaced[waiter] = r;
    return;
  }
}

void Scheduler::State::NeverStarted(TaskRef r, std::string reason) {
  Task& t = task(r);
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  DropHold(r);
  Transition(r, TaskState::kQueued, std::move(reason));
  Enqueue(r, true);
}

// --- queue-ahead ---------------------------------------------------------------

void Scheduler::State::NoteTail(uint32_t w) {
  if (!config.queue_ahead || workers[w].in_tails) return;
  workers[w].in_tails = true;
  tail_workers.push_back(w);
}

uint32_t Scheduler::State::FindTail(uint32_t w, const ResourceRequest& req) const {
  if (!Queueable(req)) return kNone;
  const uint32_t cores = req.CoreCount();
  uint32_t best = kNone;
  for (uint32_t a : workers[w].actives) {
    const Active& act = actives[a];
    if (!IsTail(act) || RequestOf(act.task).IsCoreShare()) continue;  // a shared core
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
  if (!Schedulable(w)) return false;
  // The reserved worker drains for its task; it is offered again (and looked
  // at here) when the reservation ends.
  if (reservation.IsOn(w)) return HasTail(w);
  WalkHeads([&](uint32_t cls, TaskRef r) {
    const ResourceRequest& req = RequestOf(r);
    if (!workers[w].res->CanEverFit(req)) return Walk::kNext;  // not for this worker
    if (CanPlace(w, r)) {  // room freed meanwhile: r is the first head for it
      Place(cls, r, w);
      return Walk::kRestart;
    }
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
  if (settling) return;
  std::vector<uint32_t> ws;
  ws.swap(tail_workers);
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
  Transition(r, TaskState::kAssigned, "");
}

}  // namespace drover::core
