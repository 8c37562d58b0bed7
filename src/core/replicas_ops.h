// Replicas (replicas.cc).
//
// Copies of a succeeded task's outputs on further workers (`replicas` in
// its spec). Its outcome lists the holders: outputs_on, then replicas,
// each added when its worker reports a complete copy (journaled as the
// outcome again). The outputs are lost only when every holder is.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_REPLICAS_OPS_H_
#define DROVER_CORE_REPLICAS_OPS_H_

#include <vector>

#include "core/scheduler_state.h"

namespace drover::core {

// Asks workers that hold nothing of `r`'s outputs yet for the copies its
// spec wants beyond those it has: the policy's order, live, not drained
// or paused workers only; fewer (or none) when the pool has fewer.
void Replicate(State& s, TaskRef r);
Status OnOutputsReplicated(State& s, const OutputsReplicated& e);
// Every worker that holds `o`'s outputs (outputs_on first).
std::vector<WorkerId> HoldersOf(const TaskOutcome& o);
// Holder `w` of r's outputs is lost past the lease bound while another
// holder lives: it is dropped from the outcome (journaled) and a new copy
// is asked for.
void DropHolder(State& s, TaskRef r, WorkerId w);
// Holders of r's outputs lost past the lease bound.
bool HolderLostPastBound(const State& s, WorkerId w);

}  // namespace drover::core

#endif  // DROVER_CORE_REPLICAS_OPS_H_
