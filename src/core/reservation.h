// Reservation: the one task being overtaken that gets a worker held for it
// (backfill), so a stream of small tasks cannot starve a large one.
//
// Internal to src/core. The rules (reservation.cc): when a later class head
// is placed on a worker where an earlier head did not fit, the earlier one
// is reserved a worker, the one where it can start first by the time limits
// (TaskGroupSpec::timeout) of what runs there. On that worker no other task
// may take anything the reserved one is short of, or make it short of
// something more (ReservationAllows), except
//  - the head of the reserved task's own class (it is ahead of it), and
//  - a task whose own limit ends by the reserved task's planned start
//    (EASY backfilling), even from behind its class head
//    (BackfillBehindHeads, kBackfillScan deep per class): nobody ahead of
//    it could use that room before the planned start.
// Queue-ahead never queues a task on the reserved worker: its room drains.
// A worker held for a preemptor (preemption.h) is never reserved, and a
// preemptor holds no reservation: the worker it preempts on is its own.
//
// Invariants (between events):
//  - At most one reservation at a time; a task of higher priority (or of
//    the same priority and an earlier job slot or index) takes it over
//    (Reserve).
//  - While `active`: `task` is queued (Place, PlaceBehind, Adopt,
//    AdoptQueued, Cancel and Park end the reservation when its task leaves
//    the queue or parks), and `worker` is Schedulable (SyncPolicy and
//    OnWorkerLost end it when the worker leaves placement).
//  - `shadow_valid` is false whenever the attempts on `worker` changed
//    since `shadow_us` was computed (WorkerTasksChanged).
//
// Changed by Reserve and EndReservation (reservation_ops.h), and the
// handlers named above.
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_RESERVATION_H_
#define DROVER_CORE_RESERVATION_H_

#include <cstdint>

#include "core/task.h"
#include "core/task_queue.h"

namespace drover::core {

// How far past a class head BackfillBehindHeads looks, per class.
inline constexpr uint32_t kBackfillScan = 256;

// A time that never comes: FitTime's answer when it depends on a task
// without a time limit.
inline constexpr int64_t kNever = INT64_MAX;

struct Reservation {
  bool active = false;
  TaskRef task;
  uint32_t worker = kNone;
  // When the reserved task fits on `worker` at the latest if every task
  // there ends by its time limit (TaskGroupSpec::timeout); kNever when that
  // depends on a task without one. Recomputed when the worker's tasks
  // change (shadow_valid false).
  int64_t shadow_us = 0;
  bool shadow_valid = false;

  // The reservation is held for task `r`.
  bool IsFor(TaskRef r) const { return active && task == r; }
  // The reservation holds worker slot `w`.
  bool IsOn(uint32_t w) const { return active && worker == w; }
};

}  // namespace drover::core

#endif  // DROVER_CORE_RESERVATION_H_
