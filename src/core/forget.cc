// Scheduler::ForgetJob: retention of finished jobs (scheduler.h).
#include "core/job_lifecycle_ops.h"
#include "core/result_cache_ops.h"
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
  DropJob(s, slot);
  if (id >= s.forgotten_top) {
    s.forgotten_top = id;
    s.forgotten_top_us = s.now_us;
  }
  return Status::Ok();
}

void DropJob(State& s, uint32_t slot) {
  ForgetCached(s, slot);
  Job& job = s.jobs[slot];
  const JobId id = job.id;
  const uint32_t count = static_cast<uint32_t>(job.tasks.size());
  if (s.extras.size() < count) {
    for (auto e = s.extras.begin(); e != s.extras.end();) {
      e = (e->first >> 32) == slot ? s.extras.erase(e) : std::next(e);
    }
  } else {
    for (uint32_t i = 0; i < count; ++i) s.extras.erase(ExtraKey(TaskRef{slot, i}));
  }
  // Few tasks have past attempts: one pass over them all.
  for (auto e = s.past.begin(); e != s.past.end();) {
    e = (e->first >> 32) == slot ? s.past.erase(e) : std::next(e);
  }
  // Fewer still were preempted.
  auto& preempted = s.preemption.preempted;
  for (auto e = preempted.begin(); e != preempted.end();) {
    e = (e->first >> 32) == slot ? preempted.erase(e) : std::next(e);
  }
  s.job_watchers.erase(id);
  s.task_watchers.erase(s.task_watchers.lower_bound(TaskId{id, 0}),
                        s.task_watchers.lower_bound(TaskId{id + 1, 0}));
  s.job_slots.erase(id);
  job.forgotten = true;
  if (s.restoring) {
    // Nothing names its tasks yet (no queue, timer or active): free them.
    job.tasks = {};
    job.groups = {};
  }
}

}  // namespace drover::core
