// Scheduler::ForgetJob: retention of finished jobs (scheduler.h).
#include "core/scheduler_state.h"

namespace drover::core {

Status Scheduler::ForgetJob(JobId id) {
  State& s = *state_;
  auto it = s.job_slots.find(id);
  if (it == s.job_slots.end()) return NotFound("no job " + std::to_string(id));
  const uint32_t slot = it->second;
  const Job& job = s.jobs[slot];
  uint64_t terminal = 0;
  for (TaskState st : {TaskState::kSucceeded, TaskState::kFailed, TaskState::kCanceled}) {
    terminal += job.counts[static_cast<int>(st)];
  }
  if (terminal != job.tasks.size()) {
    return FailedPrecondition("job " + std::to_string(id) + " is not done");
  }
  s.DropJob(slot);
  if (id >= s.forgotten_top) {
    s.forgotten_top = id;
    s.forgotten_top_us = s.now_us;
  }
  return Status::Ok();
}

void Scheduler::State::DropJob(uint32_t slot) {
  Job& job = jobs[slot];
  const JobId id = job.id;
  const uint32_t count = static_cast<uint32_t>(job.tasks.size());
  if (extras.size() < count) {
    for (auto e = extras.begin(); e != extras.end();) {
      e = (e->first >> 32) == slot ? extras.erase(e) : std::next(e);
    }
  } else {
    for (uint32_t i = 0; i < count; ++i) extras.erase(ExtraKey(TaskRef{slot, i}));
  }
  // Few tasks have past attempts: one pass over them all.
  for (auto e = past.begin(); e != past.end();) {
    e = (e->first >> 32) == slot ? past.erase(e) : std::next(e);
  }
  // Fewer still were preempted.
  auto& preempted = preemption.preempted;
  for (auto e = preempted.begin(); e != preempted.end();) {
    e = (e->first >> 32) == slot ? preempted.erase(e) : std::next(e);
  }
  job_watchers.erase(id);
  task_watchers.erase(task_watchers.lower_bound(TaskId{id, 0}),
                      task_watchers.lower_bound(TaskId{id + 1, 0}));
  job_slots.erase(id);
  job.forgotten = true;
  if (restoring) {
    // Nothing names its tasks yet (no queue, timer or active): free them.
    job.tasks = {};
    job.groups = {};
  }
}

}  // namespace drover::core
