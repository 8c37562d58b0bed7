#include "server/record_fold.h"

#include <algorithm>
#include <type_traits>

namespace drover::server {

void RecordFold::Add(const core::Record& record) {
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, core::JobRecord>) {
          if (r.job > highest_job_) highest_job_ = r.job;
          if (!r.spec) {  // a tombstone: the job was forgotten
            jobs_.erase(r.job);
            if (r.job == highest_job_) highest_forgotten_at_ = r.at;
            return;
          }
          JobRecords& job = jobs_[r.job];
          job.job = r;
          job.last_change = std::max(job.last_change, r.at);
        } else {
          auto job = jobs_.find(r.task.job);
          if (job == jobs_.end()) return;  // Restore would reject it too
          job->second.last_change = std::max(job->second.last_change, r.at);
          TaskRecords& t = job->second.tasks[r.task.index];
          if constexpr (std::is_same_v<T, core::TaskRecord>) {
            const bool active = t.latest && (t.latest->state == core::TaskState::kAssigned ||
                                              t.latest->state == core::TaskState::kRunning);
            if (r.state == core::TaskState::kQueued && r.attempt > 0 && active &&
                t.latest->attempt == r.attempt) {
              PastAttempt p;
              p.attempt = r.attempt;
              p.worker = t.latest->worker;
              if (t.latest->state == core::TaskState::kRunning) p.started_at = t.latest->at;
              p.ended_at = r.at;
              p.reason = r.reason;
              if (t.outcome && t.outcome->attempt == r.attempt) p.outcome = t.outcome->outcome;
              if (t.past.size() >= kMaxPastAttempts) t.past.erase(t.past.begin());
              t.past.push_back(std::move(p));
            }
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

std::vector<RecordFold::PastAttempt> RecordFold::PastAttempts(TaskId task) const {
  auto job = jobs_.find(task.job);
  if (job == jobs_.end()) return {};
  auto t = job->second.tasks.find(task.index);
  if (t == job->second.tasks.end()) return {};
  return t->second.past;
}

std::optional<Time> RecordFold::LastChange(JobId job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.last_change;
}

bool RecordFold::IsTombstone(const core::Record& record) {
  const auto* job = std::get_if<core::JobRecord>(&record);
  return job != nullptr && !job->spec;
}

JobId RecordFold::JobOf(const core::Record& record) {
  return std::visit(
      [](const auto& r) -> JobId {
        if constexpr (std::is_same_v<std::decay_t<decltype(r)>, core::JobRecord>) {
          return r.job;
        } else {
          return r.task.job;
        }
      },
      record);
}

std::set<JobId> RecordFold::ForgottenIn(const std::vector<core::Record>& records) {
  std::set<JobId> out;
  for (const core::Record& r : records) {
    if (IsTombstone(r)) out.insert(JobOf(r));
  }
  return out;
}

std::vector<core::Record> RecordFold::Snapshot() const {
  std::vector<core::Record> out;
  if (highest_job_ != 0 && !jobs_.count(highest_job_)) {
    out.emplace_back(std::in_place_type<core::JobRecord>, highest_job_, nullptr,
                     highest_forgotten_at_);
  }
  for (const auto& [id, job] : jobs_) {
    out.push_back(job.job);
    for (const auto& [index, t] : job.tasks) {
      const TaskId task{id, index};
      for (const PastAttempt& p : t.past) {
        // The records this attempt was folded from, in their order.
        // (Built in place from every field: a copied or value-initialised
        // record trips GCC's maybe-uninitialized inside the variant.)
        if (p.outcome) {
          out.emplace_back(std::in_place_type<core::OutcomeRecord>, task, p.attempt, *p.outcome,
                           p.ended_at);
        }
        out.emplace_back(std::in_place_type<core::TaskRecord>, task,
                         p.started_at ? core::TaskState::kRunning : core::TaskState::kAssigned,
                         p.attempt, p.worker, p.started_at.value_or(p.ended_at), std::string(),
                         0u, std::vector<uint32_t>(), std::vector<core::GpuGrant>());
        out.emplace_back(std::in_place_type<core::TaskRecord>, task, core::TaskState::kQueued,
                         p.attempt, p.worker, p.ended_at, p.reason, 0u, std::vector<uint32_t>(),
                         std::vector<core::GpuGrant>());
      }
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
