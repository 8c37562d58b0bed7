// PreemptionBook: what the core keeps about preemption by priority
// (SchedulerConfig::preempt_priority): the preemptions in flight, and how
// often and when each task was preempted.
//
// Internal to src/core. The rules (preemption.cc): a queued task of at
// least `preempt_priority` that heads its class and that no worker can
// place now (PlaceClass, and every Tick for the heads still waiting) picks
// victims on one worker (ChooseVictims): assigned or running attempts whose
// lease was granted, of priority at most its own minus `preempt_gap`,
// `preemptible`, neither being stopped already nor in their cool-down, on a
// Schedulable worker it could ever run on that no other preemption,
// take-back hold or reservation of a task at least as high holds. An
// attempt waiting behind another (queue-ahead) would take that one's room
// as it ends: it goes with it, and both must qualify. On a worker: one
// victim if one makes room (the first in the order below), else victims
// in that order until it fits, less those it does not need (the highest
// first). Among workers: the fewest victims, then the lowest highest-victim
// priority, then the least work lost (the victims' run time so far: the
// most recently started); then join order. Each victim gets
// a vacating KillTask and TaskFlag::kPreempted; the worker is held for the
// preemptor (PreemptionAllows, in CanPlace: another task may start there
// only if the preemptor still fits once the victims have ended), and the
// preemptor starts there as the last victim's room frees (PlaceOnWorker
// walks the heads in priority order). A victim's end (reported finished,
// vacated or not, or its lease gone) requeues it without using a retry,
// with the reason "preempted by 14.2 (priority 90)", unless it succeeded.
//
// Invariants (between events):
//  - `in_flight`: at most one entry per preemptor and one per worker slot;
//    its preemptor is queued and not parked, its worker Schedulable. It
//    ends when the preemptor leaves the queue (Transition) or parks, when
//    the worker leaves placement (SyncPolicy, OnWorkerLost), and when its
//    last victim has ended and the worker was offered to the heads
//    (PlaceOnWorker), whether the preemptor took it or not.
//  - `victims` of an entry: attempts still current with TaskFlag::kPreempted
//    set; EndActive removes one as it ends (VictimEnded).
//  - `preempted`: one entry per task ever preempted (ExtraKey), never per
//    attempt; not journaled (a restart forgets counts and cool-downs).
//
// Changed by Preempt, VictimEnded, EndPreemption and DropPreemptionOn
// (preemption.cc), and the handlers named above.
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_PREEMPTION_H_
#define DROVER_CORE_PREEMPTION_H_

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "core/task.h"
#include "core/task_queue.h"

namespace drover::core {

// One preemption whose victims are still ending.
struct Preemption {
  TaskRef preemptor;
  uint32_t worker = kNone;  // worker slot held for it
  // (task, attempt) of the victims not ended yet, in task id order.
  std::vector<std::pair<TaskRef, uint32_t>> victims;
};

// How often a task was preempted, and by whom last (its requeue reason).
struct Preempted {
  uint32_t count = 0;
  int64_t last_us = 0;
  TaskId by;
  int32_t by_priority = 0;
};

struct PreemptionBook {
  std::vector<Preemption> in_flight;                  // few: one per waiting preemptor
  std::unordered_map<uint64_t, Preempted> preempted;  // key: ExtraKey (task.h)

  // The preemption in flight for `preemptor` / on worker slot `w`; null
  // when none.
  const Preemption* For(TaskRef preemptor) const {
    for (const Preemption& p : in_flight) {
      if (p.preemptor == preemptor) return &p;
    }
    return nullptr;
  }
  const Preemption* On(uint32_t w) const {
    for (const Preemption& p : in_flight) {
      if (p.worker == w) return &p;
    }
    return nullptr;
  }
};

}  // namespace drover::core

#endif  // DROVER_CORE_PREEMPTION_H_
