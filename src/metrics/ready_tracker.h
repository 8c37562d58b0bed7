// ReadyTracker: scheduling latency — how long a task waited from becoming
// runnable to being assigned — from the core's TaskStateChanged commands.
//
// Runnable means: queued at submission with no unmet dependency (no state
// change is emitted for that, so the job's submission time stands in),
// waiting -> queued (dependencies met), or a retry once its backoff is over
// (not when the attempt failed). A task queued before `since` (a job
// restored from the journal) is not timed: its wait is unknown.
//
// Thread safety: not synchronised (the server's loop owns it).
#ifndef DROVER_METRICS_READY_TRACKER_H_
#define DROVER_METRICS_READY_TRACKER_H_

#include <optional>
#include <unordered_map>

#include "common/time.h"
#include "core/commands.h"
#include "core/scheduler.h"

namespace drover::metrics {

class ReadyTracker {
 public:
  // `since`: tasks that became runnable before this are not timed.
  explicit ReadyTracker(Time since) : since_(since) {}

  // Feeds one change that happened at `at`, with the scheduler as it is
  // right after it. Returns the wait when the change is an assignment of a
  // timed task.
  std::optional<Duration> OnStateChanged(const core::TaskStateChanged& change, Time at,
                                         const core::Scheduler& scheduler);

  // Tasks being timed (queued, not yet assigned).
  size_t pending() const { return ready_since_.size(); }

 private:
  Time since_;
  std::unordered_map<TaskId, Time> ready_since_;
};

}  // namespace drover::metrics

#endif  // DROVER_METRICS_READY_TRACKER_H_
