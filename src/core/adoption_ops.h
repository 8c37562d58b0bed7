// Re-attach and adoption (adoption.cc): a worker's attach after a restart
// is the truth about it. What the core has there that it does not list is
// taken back; what it lists that the journal never saw is adopted, only
// from a worker the restore expected (Adoptable); the settle hold keeps
// placement off until the expected workers attached. The state they keep
// is Adoption (adoption.h).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_ADOPTION_OPS_H_
#define DROVER_CORE_ADOPTION_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

// A re-attach's report is the truth about its worker: every attempt the
// core has on worker slot `w` that `e` lists neither as running nor as
// finished is not there. One never sent (claim pending) is left to its
// grant; any other goes back to its queue at once, its leases released:
// as a lost attempt when it had started, else as never started.
void TakeBackUnreported(State& s, uint32_t w, const WorkerAttached& e);
// While settling: `worker` attached; ends the hold when it was the last.
void SettleAttached(State& s, WorkerId worker);
// Ends the placement hold and offers every class and worker again.
void EndSettle(State& s);
// A running attempt reported by the worker in slot `w` (WorkerAttached).
void ReconcileRunning(State& s, uint32_t w, const ReportedAttempt& run);
// Makes attempt `attempt` of the queued task `r`, which the journal never
// saw, current on worker slot `w` (events.h, WorkerAttached). `run`: the
// attempt still runs there with these resources (booked, leases claimed);
// null: it already finished (nothing booked or claimed). False, and
// nothing changed, when `run`'s resources are not free there.
bool Adopt(State& s, TaskRef r, uint32_t w, uint32_t attempt, const ReportedAttempt* run);
// Queue-ahead: makes the queued attempt `run` of `r`, which the journal
// never saw, wait again behind the attempt on worker slot `w` that holds
// its cores. False, and nothing changed, when there is no such attempt.
bool AdoptQueued(State& s, TaskRef r, uint32_t w, const ReportedAttempt& run);
// True when attempt `attempt` of `r` may be one the journal never saw.
bool Adoptable(const State& s, TaskRef r, uint32_t attempt);

}  // namespace drover::core

#endif  // DROVER_CORE_ADOPTION_OPS_H_
