// Queue-ahead and take-back (queue_ahead.cc): a head that fits no free
// room waits behind a running task whose cores and memory cover it, booking
// nothing until that task's EndActive books it in the same step; a waiter
// is taken back to freed room elsewhere, and a higher-priority head may
// displace one. The book of waiters and holds is QueueAheadBook
// (queue_ahead.h).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_QUEUE_AHEAD_OPS_H_
#define DROVER_CORE_QUEUE_AHEAD_OPS_H_

#include <cstdint>
#include <utility>

#include "core/scheduler_state.h"

namespace drover::core {

void NoteTail(State& s, uint32_t w);
// Books the first class head that could ever run on `w` behind a task
// there whose resources cover it, as long as there are such tasks; the
// head that cannot go behind one stops it (nothing overtakes it on w).
// False when `w` has no task left that something could wait behind.
bool QueueAhead(State& s, uint32_t w);
// QueueAhead on the listed workers, until a pass books nothing.
void QueueAheadAnywhere(State& s);
// The attempt `act` waits behind: its task and attempt number; attempt 0
// when it waits behind none.
inline std::pair<TaskId, uint32_t> WaitsBehind(const State& s, const Active& act) {
  if (act.prev == kNone) return {TaskId{}, 0};
  return {s.IdOf(s.actives[act.prev].task), s.actives[act.prev].attempt};
}
// The Active on `w` that `req` may wait behind (kNone: none).
uint32_t FindTail(const State& s, uint32_t w, const ResourceRequest& req);
bool HasTail(const State& s, uint32_t w);
// Assigns class head `r` behind Active `prev` (popped from its class).
void PlaceBehind(State& s, uint32_t cls, TaskRef r, uint32_t prev);
// Links Active `a` behind Active `prev` on their worker and lists it
// among the waiters; `seq`: its queue entry's (Active::wait_seq).
void LinkBehind(State& s, uint32_t a, uint32_t prev, uint64_t seq);
inline void UnlistWaiter(State& s, const Active& act) {
  s.queue_ahead.RemoveWaiter(s.SpecOf(act.task).priority, act.wait_seq, act.task, act.attempt);
}
// Queue-ahead take-back, on a worker `w` whose room just freed: the first
// waiter (behind a task on any worker) that fits here and goes before
// every class head that does is withdrawn from where it waits, and this
// room is held for it until its worker answers. Without that, a task
// queued behind a long one would wait for it while other workers free.
void TakeBack(State& s, uint32_t w);
// Queue-ahead never overtakes priority: a head `r` that fits no free
// room and finds no free place in any worker's queue takes the place of a
// waiter of lower priority (the lowest first, among the last
// kTakeBackScan waiters) whose predecessor's cores and memory would cover
// it. That waiter is withdrawn; once its worker answers, its predecessor
// is a tail again and QueueAhead, walking heads in priority order, puts
// `r` there. A waiter whose predecessor ends before the withdrawal
// arrives still starts (it had the room first).
void Displace(State& s, TaskRef r);
// Takes waiter `r` back from its worker: at once when its assignment was
// not sent yet (back to its queue), else by a withdrawal (TaskFlag::kWithdraw),
// holding the room of `hold` (kNone: none) for it until the answer.
void Withdraw(State& s, TaskRef r, const Reason& why, uint32_t hold);
// Waiter `t` (assigned, behind another) may be taken back: not lost,
// neither restored nor adopted, not already being withdrawn, canceled or
// preempted.
bool Movable(const State& s, const Task& t);
// The task the room of `w` is held for, if the hold is still current.
const TaskRef* HeldFor(State& s, uint32_t w);
// Ends the hold for `r` (its withdrawal was answered) and offers the
// worker again.
void DropHold(State& s, TaskRef r);
// Placing `r` on `w` leaves room for the task `w` is held for.
bool HoldAllows(State& s, uint32_t w, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_QUEUE_AHEAD_OPS_H_
