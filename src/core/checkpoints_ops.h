// Checkpoints (checkpoints.cc): the latest saved manifest per task
// (checkpoint.h), kept in the task's Extra and journaled as a
// CheckpointRecord.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_CHECKPOINTS_OPS_H_
#define DROVER_CORE_CHECKPOINTS_OPS_H_

#include <memory>

#include "core/scheduler_state.h"

namespace drover::core {

Status OnCheckpointSaved(State& s, const CheckpointSaved& e);
void RestoreCheckpoint(State& s, const CheckpointRecord& record);
std::shared_ptr<const Checkpoint> CheckpointOf(const State& s, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_CHECKPOINTS_OPS_H_
