#include "server/retention.h"

#include <spdlog/spdlog.h>

#include "common/quantity.h"

#include <algorithm>
#include <map>
#include <vector>

namespace drover::server {

Duration Retention::interval() const {
  return std::clamp<Duration>(keep_ / 100, Seconds(1), Seconds(600));
}

Retention::Pass Retention::Prune(Time now) {
  Pass pass;
  if (keep_ <= Duration::zero()) return pass;
  const core::Scheduler& sched = driver_.scheduler();
  const std::vector<JobId> jobs = sched.Jobs();
  // How many held jobs name each job in --after.
  std::map<JobId, int64_t> named;
  auto names = [&](JobId job, int delta) {
    Result<std::shared_ptr<const core::JobSpec>> spec = sched.GetJobSpec(job);
    if (!spec.ok() || *spec == nullptr) return;
    for (JobId after : (*spec)->after_jobs) named[after] += delta;
    for (const TaskId& after : (*spec)->after_tasks) named[after.job] += delta;
  };
  for (JobId job : jobs) names(job, 1);
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    const JobId job = *it;
    Result<core::JobInfo> info = sched.GetJob(job);
    if (!info.ok() || !info->done) continue;
    const std::optional<Time> last = sched.LastChange(job);
    if (!last || now - *last < keep_) continue;
    if (auto n = named.find(job); n != named.end() && n->second > 0) continue;
    if (pass.tasks > 0 && pass.tasks + info->task_count > prune_tasks_) {
      pass.more = true;
      break;
    }
    names(job, -1);  // before it is gone from the scheduler
    if (Status s = driver_.ForgetJob(job); !s.ok()) {
      spdlog::warn("retention: cannot forget job {}: {}", job, s.ToString());
      continue;
    }
    ++pass.jobs;
    pass.tasks += info->task_count;
  }
  if (pass.jobs > 0) {
    spdlog::info("retention: forgot {} finished job(s) ({} tasks) older than {}", pass.jobs,
                 pass.tasks, FormatDuration(keep_));
  }
  return pass;
}

}  // namespace drover::server
