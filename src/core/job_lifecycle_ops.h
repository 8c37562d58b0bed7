// The job lifecycle (job_lifecycle.cc; DropJob in forget.cc): submit, the
// group dependencies (a group's `unmet` counts its dependency groups with a
// task not succeeded; Enqueue sends a task of an unmet group to waiting),
// success and bad ends, cancel, retry.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_JOB_LIFECYCLE_OPS_H_
#define DROVER_CORE_JOB_LIFECYCLE_OPS_H_

#include <cstdint>
#include <memory>

#include "core/scheduler_state.h"

namespace drover::core {

// Builds a job's structures from its spec (no commands). Used by submit
// and restore.
Result<uint32_t> CreateJob(State& s, JobId id, std::shared_ptr<const JobSpec> spec, Time at);
Result<JobId> OnSubmit(State& s, JobId id, std::shared_ptr<const JobSpec> spec);
Status OnCancelJob(State& s, JobId job);
Status OnCancelTask(State& s, TaskId task);
// RetryJob (events.h): Retryable checks it and counts the tasks.
Result<uint64_t> Retryable(const State& s, uint32_t j);
Status OnRetryJob(State& s, const RetryJob& e);
// Failed or canceled `r` runs again: the attempt that ended it becomes
// history (as a retried one does), unless it already is, and its
// finished time is that of its latest attempt (0 if it never had one).
void NoteRetriedAttempt(State& s, TaskRef r);
// Drops a job's slot (ForgetJob, or a tombstone while restoring).
void DropJob(State& s, uint32_t slot);
// Called when a task succeeded: satisfies dependents.
void OnSucceeded(State& s, TaskRef r);
// Called when a task ended failed or canceled for good: cancels what
// depends on it.
void OnEndedBadly(State& s, TaskRef r, const Reason& why);
void SatisfyGroup(State& s, uint32_t job, uint32_t group);
void DoomJob(State& s, uint32_t job, const Reason& why);
void DoomGroup(State& s, uint32_t job, uint32_t group, const Reason& why);
// Cancels one task, whatever its state (kill and wait for the worker if it
// runs). Returns true if it is now canceled or will be.
void Cancel(State& s, TaskRef r, const Reason& why);
// Makes a queued task ready: into its class queue.
void Enqueue(State& s, TaskRef r, bool front);

}  // namespace drover::core

#endif  // DROVER_CORE_JOB_LIFECYCLE_OPS_H_
