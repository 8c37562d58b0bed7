#include "server/record_fold.h"

#include <type_traits>

namespace drover::server {

void RecordFold::Add(const core::Record& record) {
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, core::JobRecord>) {
          jobs_[r.job].job = r;
        } else {
          auto job = jobs_.find(r.task.job);
          if (job == jobs_.end()) return;  // Restore would reject it too
          TaskRecords& t = job->second.tasks[r.task.index];
          if constexpr (std::is_same_v<T, core::TaskRecord>) {
            if (r.state == core::TaskState::kAssigned) {
              t.assigned = r;
            } else if (r.state != core::TaskState::kRunning) {
              t.assigned.reset();
            }
            t.latest = r;
          } else {
            t.outcome = r;
          }
        }
      },
      record);
}

std::shared_ptr<const core::JobSpec> RecordFold::Spec(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.job.spec;
}

std::vector<core::Record> RecordFold::Snapshot() const {
  std::vector<core::Record> out;
  for (const auto& [id, job] : jobs_) {
    out.push_back(job.job);
    for (const auto& [index, t] : job.tasks) {
      if (t.outcome) out.push_back(*t.outcome);
      if (t.assigned && t.latest && t.latest->state == core::TaskState::kRunning) {
        out.push_back(*t.assigned);
      }
      if (t.latest) out.push_back(*t.latest);
    }
  }
  return out;
}

}  // namespace drover::server
