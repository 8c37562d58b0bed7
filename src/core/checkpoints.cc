// Checkpoints that follow a task (core/checkpoint.h): the latest manifest a
// worker saved for a task, kept in the task's Extra, journaled, restored,
// and handed to the next attempt.
#include <memory>

#include "core/checkpoints_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

Status OnCheckpointSaved(State& s, const CheckpointSaved& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  const Task& t = s.task(r);
  // Only the task's latest attempt, from the worker it ran on, may say what
  // the next one starts from: a save that arrives after a newer attempt was
  // assigned (or from anyone else) is stale. The attempt itself may have
  // ended already: its last save comes with its end.
  if (e.files.empty() || e.attempt == 0 || t.attempt != e.attempt ||
      (e.worker != 0 && e.worker != t.worker)) {
    return FailedPrecondition("checkpoint of " + e.task.ToString() + "#" +
                              std::to_string(e.attempt) + " which is not current");
  }
  Extra& extra = s.extras[ExtraKey(r)];
  if (extra.checkpoint && extra.checkpoint->attempt > e.attempt) {
    return FailedPrecondition("checkpoint of " + e.task.ToString() + "#" +
                              std::to_string(e.attempt) + " older than the one kept");
  }
  auto saved = std::make_shared<Checkpoint>();
  saved->attempt = e.attempt;
  saved->worker = t.worker;
  saved->saved_at = TimeFromMicros(s.now_us);
  saved->files = e.files;
  extra.checkpoint = saved;
  s.jobs[r.job].changed_us = std::max(s.jobs[r.job].changed_us, s.now_us);
  s.out->push_back(Persist{CheckpointRecord{e.task, *saved}});
  return Status::Ok();
}

void RestoreCheckpoint(State& s, const CheckpointRecord& record) {
  if (s.restored_forgotten.count(record.task.job)) return;
  Result<TaskRef> r = s.Find(record.task);
  if (!r.ok()) return;
  s.extras[ExtraKey(*r)].checkpoint = std::make_shared<Checkpoint>(record.checkpoint);
}

std::shared_ptr<const Checkpoint> CheckpointOf(const State& s, TaskRef r) {
  if (s.extras.empty()) return nullptr;
  auto it = s.extras.find(ExtraKey(r));
  return it == s.extras.end() ? nullptr : it->second.checkpoint;
}

}  // namespace drover::core
