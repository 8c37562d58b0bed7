// QueueAheadBook: what the core keeps about queue-ahead
// (SchedulerConfig::queue_ahead): the attempts waiting on a worker behind
// another, the workers where one more could wait, and the take-backs in
// flight.
//
// Internal to src/core. The rules (queue_ahead.cc): a class head that fits
// no free room may be assigned behind an attempt on a worker whose cores and
// memory cover it (PlaceBehind); the worker starts it as that one exits.
// Only the first head that could ever run on that worker may queue there
// (nothing is overtaken), never on the reserved worker (its room drains),
// and only CPU and memory requests queue (Queueable). A waiter is taken back
// when room for it frees on another worker first (TakeBack, which holds
// that room until the worker answers) and when a head of higher priority
// could take its place (Displace).
//
// Invariants (between events):
//  - Links pair attempts on one worker: `b.prev == a` exactly when
//    `a.next == b` (Active slots). An attempt is linked behind only a tail
//    (IsTail: neither waiting nor waited for), so at most one waits behind
//    each attempt and a waiter has none behind it.
//  - A waiter (prev set) books nothing: its alloc (cores and memory) is
//    part of its predecessor's. When the predecessor ends, EndActive
//    unlinks the waiter and books exactly its alloc in the same step, so a
//    core is never counted twice and nothing can take it in between.
//  - `waiters` lists every waiter once, under (-priority, wait_seq, task,
//    attempt), except one TakeBack withdrew (it unlists it as it withdraws);
//    an entry names an attempt that waits (TakeBack drops any other it
//    meets).
//  - `holds`: at most one withdrawn waiter (TaskFlag::kWithdraw) per worker
//    slot, whose room that worker keeps (HoldAllows) until the withdrawal's
//    answer comes back (DropHold) or it starts anyway. An entry whose task
//    is no longer an assigned, withdrawn attempt is stale and is dropped
//    where it is met (HeldFor).
//  - `displaced`: a waiter Displace withdrew -> the head it makes way for;
//    a head has at most one such withdrawal outstanding. Entries whose
//    waiter is no longer being withdrawn are dropped as Displace looks.
//  - `tail_workers`: workers that may hold an attempt nothing waits behind
//    yet, each listed once (Worker::in_tails); QueueAheadAnywhere looks at
//    them and keeps those that still have one.
//
// Changed by PlaceBehind, AdoptQueued and FinishRestore (LinkBehind),
// EndActive (leases.cc: unlinks and unlists), TakeBack, Withdraw, DropHold
// and Displace (queue_ahead.cc), NoteTail and QueueAheadAnywhere.
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_QUEUE_AHEAD_H_
#define DROVER_CORE_QUEUE_AHEAD_H_

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/resources.h"
#include "core/task.h"
#include "core/task_queue.h"

namespace drover::core {

// How many waiting queue-ahead attempts TakeBack looks at per freed worker.
inline constexpr uint32_t kTakeBackScan = 8;

// A request that may wait behind another task: GPUs and counters are
// leased per unit, and passing them on would need the lease keys handed
// over too, so only CPU and memory requests queue.
// Shares of a core do not queue: they share a core instead, and what one
// would inherit from its predecessor is not a core of its own.
inline bool Queueable(const ResourceRequest& req) {
  return req.gpus == 0 && req.counters.empty() && !req.IsCoreShare();
}

// An attempt something may wait behind: live, holding its resources, and
// neither waiting itself nor waited for.
inline bool IsTail(const Active& act) {
  return act.prev == kNone && act.next == kNone && !act.lost && act.booked;
}

struct QueueAheadBook {
  // A waiter's place in line: (-priority, wait_seq, task, attempt), so the
  // set runs in the order waiters left their queues, higher priority first.
  using Waiter = std::tuple<int64_t, uint64_t, TaskRef, uint32_t>;

  std::vector<uint32_t> tail_workers;
  std::set<Waiter> waiters;
  std::map<uint32_t, TaskRef> holds;     // worker slot -> withdrawn waiter
  std::map<TaskRef, TaskRef> displaced;  // withdrawn waiter -> the head it makes way for

  // Lists / unlists attempt `attempt` of `task`, of that priority, which
  // left its queue at `seq`. Unlisting one not listed does nothing.
  void AddWaiter(int32_t priority, uint64_t seq, TaskRef task, uint32_t attempt) {
    waiters.emplace(-int64_t{priority}, seq, task, attempt);
  }
  void RemoveWaiter(int32_t priority, uint64_t seq, TaskRef task, uint32_t attempt) {
    waiters.erase({-int64_t{priority}, seq, task, attempt});
  }
  // Worker slot `w` keeps room for the withdrawn waiter `task`.
  void Hold(uint32_t w, TaskRef task) { holds[w] = task; }
  // Ends the hold for `task`: the worker slot that held room for it, or
  // kNone when none did.
  uint32_t EndHold(TaskRef task) {
    for (auto it = holds.begin(); it != holds.end(); ++it) {
      if (it->second == task) {
        const uint32_t w = it->first;
        holds.erase(it);
        return w;
      }
    }
    return kNone;
  }
};

}  // namespace drover::core

#endif  // DROVER_CORE_QUEUE_AHEAD_H_
