// Attempt events (attempt_events.cc): started, finished, refused, lease
// granted, rejected and freed; Transition, through which every change of
// a task's state goes (counts, StateChanged and Persist); how an attempt
// ends (AttemptFailed, LostAttemptEnded, NeverStarted) and the history it
// leaves (NotePastAttempt).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_ATTEMPT_EVENTS_OPS_H_
#define DROVER_CORE_ATTEMPT_EVENTS_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

Status OnStarted(State& s, const TaskStarted& e);
Status OnFinished(State& s, TaskFinished& e);
Status OnRefused(State& s, const TaskRefused& e);
Status OnGranted(State& s, const LeaseGranted& e);
Status OnRejected(State& s, const LeaseRejected& e);
Status OnFreed(State& s, const LeaseFreed& e);
// Moves a task to `to`, updating counts, and emits StateChanged + Persist.
void Transition(State& s, TaskRef r, TaskState to, Reason why = {});
// The attempt of `r` that was `from` (assigned or running) ended at
// `at_us` with the task queued again for `reason`: kept in `past`.
void NotePastAttempt(State& s, TaskRef r, TaskState from, int64_t at_us, const Reason& why);
// An attempt failed (outcome or loss); retries or fails the task.
void AttemptFailed(State& s, TaskRef r, Reason why, bool counts_as_failure);
// The lost (or unreported) attempt of `r` is gone: requeued as a lost
// attempt with `reason`, failed after max_lost_attempts, or canceled.
void LostAttemptEnded(State& s, TaskRef r, Reason why = why::WorkerLost());
// The current attempt of `r` ended before it started (dropped from its
// worker's queue: withdrawn, or fenced): back to the front of its class,
// no failure counted.
void NeverStarted(State& s, TaskRef r, Reason why);
// Worker slot `w` takes nothing new until its next heartbeat or attach.
void HoldRefusing(State& s, uint32_t w);
Duration BackoffFor(const State& s, TaskRef r);
// How long its worker has to start an attempt of `r`: start_timeout,
// plus the time to fetch its dependencies' output files at
// input_fetch_rate.
Duration StartBoundOf(const State& s, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_ATTEMPT_EVENTS_OPS_H_
