// Reservation and backfill (reservation.cc): one head at a time reserves
// the worker where it can start first; others use it only as the rules of
// reservation.h allow (EASY backfilling), and short tasks from behind the
// class heads fill it (BackfillBehindHeads) or a leaving worker
// (FillLeavingWorker).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_RESERVATION_OPS_H_
#define DROVER_CORE_RESERVATION_OPS_H_

#include <cstdint>
#include <functional>

#include "core/scheduler_state.h"

namespace drover::core {

// Placing `r` on the reserved worker `w` leaves the reserved task what it
// needs (see reservation.h).
bool ReservationAllows(State& s, uint32_t w, TaskRef r);
// The latest time the request fits on worker w if every task there ends
// by its time limit: now when it fits now, kNever when it needs room a
// task without a limit holds (see Reservation::shadow_us).
int64_t FitTime(const State& s, uint32_t w, const ResourceRequest& req);
// The reservation's FitTime, cached.
int64_t ReservationShadow(State& s);
// The worker's tasks changed: its FitTime may have.
inline void WorkerTasksChanged(State& s, uint32_t w) {
  if (s.reservation.worker == w) s.reservation.shadow_valid = false;
}
void Reserve(State& s, TaskRef r, uint32_t hint_worker);
// Ends the reservation and offers its worker again: tasks held back there
// fit nowhere else, and no free on that worker may follow to retry them.
void EndReservation(State& s);
// On the reserved worker `w`: places queued tasks behind their class
// heads whose time limit ends by the reservation's planned start.
void BackfillBehindHeads(State& s, uint32_t w);
// A worker that leaves (Ending) takes queued tasks from behind class
// heads that cannot end there in time (a head without a timeout does
// not hold its class back on it).
void FillLeavingWorker(State& s, uint32_t w);
// Places on w the queued tasks behind the class heads (kBackfillScan deep
// per class, not in class `skip`) that `pick` accepts and that fit.
void PlaceBehindHeads(State& s, uint32_t w, uint32_t skip,
                      const std::function<bool(TaskRef)>& pick);

}  // namespace drover::core

#endif  // DROVER_CORE_RESERVATION_OPS_H_
