// Placement (dispatch.cc): Dispatch places the tasks of each dirty class
// (PlaceClass: the policy's choice of worker), offers each dirty worker
// (freed room) to the class heads (PlaceOnWorker), and after a Tick lets
// the heads that still fit nowhere preempt. CanPlace is the one check of a
// task on a worker: schedulable and lasting long enough, room, and what
// a preemption hold, the reservation and a queue-ahead hold leave. Heads
// over their user's quota are parked and put back when room is given back.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_DISPATCH_OPS_H_
#define DROVER_CORE_DISPATCH_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

void Dispatch(State& s);
void PlaceClass(State& s, uint32_t cls);
void PlaceOnWorker(State& s, uint32_t w);
// Pops dead heads; false when the class is empty.
bool LiveHead(State& s, uint32_t cls, TaskRef& out);
bool QuotaAllows(const State& s, TaskRef r);
void Park(State& s, uint32_t cls, TaskRef r);
void Unpark(State& s, uint32_t user);
// Walks the live class heads in priority-then-FIFO order, parking those
// over their user's quota. `visit(cls, r)` answers kNext, kRestart (it
// changed the queues: walk again from the top) or kStop.
enum class Walk { kNext, kRestart, kStop };
template <typename Visit>
void WalkHeads(State& s, Visit visit) {
restart:
  for (const auto& key : s.queues.heads()) {
    const uint32_t cls = TaskQueues::ClassOfKey(key);
    TaskRef r;
    const TaskRef head = s.queues.Head(cls).task;
    if (!LiveHead(s, cls, r) || !(r == head)) goto restart;  // popped dead entries
    if (!QuotaAllows(s, r)) {
      Park(s, cls, r);
      goto restart;
    }
    switch (visit(cls, r)) {
      case Walk::kNext:
        continue;
      case Walk::kRestart:
        goto restart;
      case Walk::kStop:
        return;
    }
  }
}
bool CanPlace(State& s, uint32_t w, TaskRef r);
// Worker w stays long enough for r started at `from_us`: it has no end
// (WorkerResources::ends_at), or r has a timeout that ends by then.
bool LastsFor(const State& s, uint32_t w, TaskRef r, int64_t from_us);
// A worker with an end takes nothing to start later (queue-ahead): when
// the task before it ends is not known well enough.
inline bool Ending(const State& s, uint32_t w) { return s.workers[w].ending; }
// r could run on w some time: its resources fit w's offer and w stays
// long enough if r started now.
inline bool CanEverRun(const State& s, uint32_t w, TaskRef r) {
  const ResourceRequest& req = s.RequestOf(r);
  return s.workers[w].res->CanEverFit(req) && s.workers[w].res->DiskFits(req) &&
         (!s.workers[w].ending || LastsFor(s, w, r, s.now_us));
}
// Books `r` on worker `w` for a moment and answers `check()` then (false
// when it does not fit); nothing stays booked.
template <typename Check>
bool AfterPlacing(State& s, uint32_t w, TaskRef r, Check check) {
  WorkerState& res = *s.workers[w].res;
  Allocation trial;
  if (!res.Allocate(s.RequestOf(r), s.policy->PreferFullGpus(), trial)) return false;
  const bool ok = check();
  res.Free(s.RequestOf(r), trial);
  return ok;
}
// Places `r` of class `cls` on `w`; `head`: r is the class head (popped),
// else its entry stays in the queue (TaskFlag::kStaleEntry).
void Place(State& s, uint32_t cls, TaskRef r, uint32_t w, bool head = true);
void MarkClassDirty(State& s, uint32_t cls);

}  // namespace drover::core

#endif  // DROVER_CORE_DISPATCH_OPS_H_
