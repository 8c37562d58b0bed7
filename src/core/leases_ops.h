// Active slots, resources and leases (leases.cc): an attempt's slot from
// its placement to its end (EndActive frees what it booked and marks its
// worker dirty, so the room is used at once), its lease keys, renewals and
// releases, and the workers' policy keys (LoadOf, FlushLoads).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_LEASES_OPS_H_
#define DROVER_CORE_LEASES_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

uint32_t NewActive(State& s, TaskRef r, uint32_t worker_slot, uint32_t attempt);
// Frees the active's resources (if booked) and its slot; marks the worker
// dirty so the freed room is used at once.
void EndActive(State& s, uint32_t a);
LeaseKeys KeysOf(const State& s, const Active& a);
void EmitRelease(State& s, const Active& a);
void RenewAll(State& s);
void MarkWorkerDirty(State& s, uint32_t w);
void MarkLoadDirty(State& s, uint32_t w);
WorkerLoad LoadOf(const State& s, uint32_t w);
void FlushLoads(State& s);
inline bool Schedulable(const State& s, uint32_t w) {
  return !s.workers[w].lost && !s.workers[w].drained && !s.workers[w].paused &&
         !s.workers[w].refusing && s.workers[w].unhealthy.empty() && !s.workers[w].quarantined;
}

}  // namespace drover::core

#endif  // DROVER_CORE_LEASES_OPS_H_
