#include "metrics/ready_tracker.h"

#include <algorithm>

namespace drover::metrics {

std::optional<Duration> ReadyTracker::OnStateChanged(const core::TaskStateChanged& c, Time at,
                                                     const core::Scheduler& scheduler) {
  using core::TaskState;
  if (c.to == TaskState::kQueued) {
    Time ready = at;
    // A retry is runnable once its backoff is over, not when it failed.
    if (c.from == TaskState::kRunning || c.from == TaskState::kAssigned) {
      Result<core::TaskInfo> t = scheduler.GetTask(c.task);
      if (t.ok() && t->retry_at && *t->retry_at > ready) ready = *t->retry_at;
    }
    ready_since_[c.task] = ready;
    return std::nullopt;
  }
  if (c.to != TaskState::kAssigned) {
    ready_since_.erase(c.task);
    return std::nullopt;
  }
  std::optional<Time> ready;
  if (auto it = ready_since_.find(c.task); it != ready_since_.end()) {
    ready = it->second;
    ready_since_.erase(it);
  } else if (c.from == TaskState::kQueued && c.attempt <= 1) {
    // Queued at submission: ready since the job came in.
    Result<core::JobInfo> job = scheduler.GetJob(c.task.job);
    if (job.ok() && job->submitted_at >= since_) ready = job->submitted_at;
  }
  if (!ready) return std::nullopt;
  return std::max(Duration::zero(), at - *ready);
}

}  // namespace drover::metrics
