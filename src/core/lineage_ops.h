// Lineage (lineage.cc).
//
// A task's outputs live only on the worker that ran it (TaskOutcome::
// outputs_on). When that worker is lost and stays lost past the lease
// bound (lease_ttl + expiry_grace), a succeeded task whose outputs a
// dependent still needs (waiting, queued or assigned: not yet started) runs
// again, "rerun: outputs lost with worker N", and its dependents wait for
// it once more. Invariants kept: a group's `unmet` counts its dependency
// groups with a task not succeeded, so a rerun raises it again and the
// dependents' queued tasks go back to waiting (Unready); Enqueue sends a
// task whose group is unmet to waiting instead of its queue.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_LINEAGE_OPS_H_
#define DROVER_CORE_LINEAGE_OPS_H_

#include <cstdint>
#include <vector>

#include "core/scheduler_state.h"

namespace drover::core {

// Worker slot `w` was just lost: arms a kOutputsLost timer for each
// succeeded task whose outputs it holds, in jobs still running, and in
// any job held for a task with replicas (its copies are kept).
void NoteOutputsLost(State& s, uint32_t w);
// The kOutputsLost timer of attempt `attempt` of `r`.
void OutputsLostExpired(State& s, TaskRef r, uint32_t attempt);
// The worker that holds r's outputs is lost past the lease bound (or r
// has no outputs: false).
bool HolderGone(const State& s, TaskRef r);
// The tasks that would receive r's files and have not started yet: of
// groups depending on r's (not doomed), and of running jobs naming r in
// --after.
std::vector<TaskRef> AwaitingOutputsOf(const State& s, TaskRef r);
// AwaitingOutputsOf(r) is not empty.
bool OutputsNeeded(const State& s, TaskRef r);
// Succeeded `r` runs again; so do the producers of its own inputs whose
// holder is gone. `why`: the reason (default "rerun: outputs lost with").
void Rerun(State& s, TaskRef r, const Reason* why = nullptr);
// A worker fetching an input got other bytes from `holder` than task
// `producer`'s outputs say (TaskRefused::corrupt): that copy is dropped,
// and with no other copy the producer runs again. The copy of a result
// cache source on it is dropped too (result_cache_ops.h).
void NoteCorruptCopy(State& s, TaskId producer, WorkerId holder);
// Succeeded `r` lost its outputs but cannot rerun (its group is doomed):
// every task still waiting for its files is canceled with `reason`.
void CancelNeedersOf(State& s, TaskRef r, const Reason& why);
// Queued `r` waits again (a dependency reruns): out of its queue, its
// backoff, its quota list.
void Unready(State& s, TaskRef r);
// Queued `r` starts again (a retry, a refusal): the producers of its
// inputs whose holder is gone rerun first.
void RerunLostInputsOf(State& s, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_LINEAGE_OPS_H_
