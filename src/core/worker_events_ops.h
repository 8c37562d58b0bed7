// Worker events (worker_events.cc): join, attach (a worker's hello, which
// reconciles before any placement), heartbeat, lost, drained, paused, and
// an attach with another offer (Reoffer). SyncPolicy puts a worker in the
// placement policy, or takes it out, to match Schedulable after its flags
// change.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_WORKER_EVENTS_OPS_H_
#define DROVER_CORE_WORKER_EVENTS_OPS_H_

#include <algorithm>
#include <cstdint>

#include "core/dispatch_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

Status OnWorkerJoined(State& s, WorkerJoined& e);
Status OnWorkerAttached(State& s, WorkerAttached& e);
// The live worker in slot `w` re-attached offering `resources` instead of
// what it offered: its books start again from the new offer. Attempts on
// it that no longer fit are stopped at once (KillTask hard) and their end
// requeues them without counting a failure (TaskFlag::kResized).
void Reoffer(State& s, uint32_t w, WorkerResources resources);
// Books every attempt on `w` that is not booked yet (and waits behind
// none); one that does not fit there is stopped as Reoffer says.
void StopUnfitting(State& s, uint32_t w);
// Adds `w` to / removes it from the placement policy to match Schedulable.
void SyncPolicy(State& s, uint32_t w);
Status OnHeartbeat(State& s, WorkerHeartbeat& e);
Status OnWorkerLost(State& s, const WorkerLost& e);
Status OnDrained(State& s, const WorkerDrained& e);
Status OnPaused(State& s, const WorkerPaused& e);
// Keeps w's place in ending_workers true to its current offer.
inline void NoteEnding(State& s, uint32_t w) {
  s.workers[w].ending = s.workers[w].res->resources().ends_at.has_value();
  auto it = std::find(s.ending_workers.begin(), s.ending_workers.end(), w);
  if (Ending(s, w) && it == s.ending_workers.end()) s.ending_workers.push_back(w);
  if (!Ending(s, w) && it != s.ending_workers.end()) s.ending_workers.erase(it);
}

}  // namespace drover::core

#endif  // DROVER_CORE_WORKER_EVENTS_OPS_H_
