// Restore checks for tests: a scheduler rebuilt from records, and the first
// difference between two schedulers as far as every query shows them.
//
//   std::unique_ptr<Scheduler> a = RestoredFrom(journal, now);
//   std::unique_ptr<Scheduler> b = RestoredFrom(live.Snapshot(), now);
//   EXPECT_EQ(FirstDifference(*a, *b), "");
//
// Header-only, without gtest, so the seeded simulation (tests/core_sim)
// uses it too. Thread safety: none.
#ifndef DROVER_CORE_TESTING_RESTORE_CHECK_H_
#define DROVER_CORE_TESTING_RESTORE_CHECK_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/scheduler.h"

namespace drover::core::testing {

// A fresh scheduler that replayed `records` and finished restoring at
// `now`; null, with `error` set, when a record was refused.
inline std::unique_ptr<Scheduler> RestoredFrom(const std::vector<Record>& records, Time now,
                                               SchedulerConfig config = {},
                                               std::string* error = nullptr) {
  auto s = std::make_unique<Scheduler>(std::move(config));
  for (size_t i = 0; i < records.size(); ++i) {
    if (Status st = s->Restore(records[i]); !st.ok()) {
      if (error) *error = "record " + std::to_string(i) + ": " + st.ToString();
      return nullptr;
    }
  }
  Outbox ignored;
  s->FinishRestore(now, ignored);
  return s;
}

namespace internal {

inline std::string Describe(const Record& r) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, JobRecord>) {
          return "job " + std::to_string(x.job) + (x.spec ? "" : " (tombstone)") + " at " +
                 std::to_string(ToMicros(x.at));
        } else if constexpr (std::is_same_v<T, TaskRecord>) {
          return "task " + x.task.ToString() + " " + std::string(TaskStateName(x.state)) + " #" +
                 std::to_string(x.attempt) + " w" + std::to_string(x.worker) + " at " +
                 std::to_string(ToMicros(x.at)) + " started " +
                 std::to_string(ToMicros(x.started)) + " failures " + std::to_string(x.failures) +
                 " cores " + std::to_string(x.cores.size()) + " gpus " +
                 std::to_string(x.gpus.size()) + " after " + x.after.ToString() + "#" +
                 std::to_string(x.after_attempt) + " \"" + x.reason + "\"";
        } else if constexpr (std::is_same_v<T, CheckpointRecord>) {
          return "checkpoint " + x.task.ToString() + " #" + std::to_string(x.checkpoint.attempt) +
                 " files " + std::to_string(x.checkpoint.files.size());
        } else {
          return "outcome " + x.task.ToString() + " #" + std::to_string(x.attempt) + " exit " +
                 std::to_string(x.outcome.exit_code) + " at " + std::to_string(ToMicros(x.at));
        }
      },
      r);
}

inline bool SameRecord(const Record& a, const Record& b) {
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<JobRecord>(&a)) {
    const auto& y = std::get<JobRecord>(b);
    return x->job == y.job && x->spec == y.spec && x->at == y.at;
  }
  if (const auto* x = std::get_if<TaskRecord>(&a)) return *x == std::get<TaskRecord>(b);
  if (const auto* x = std::get_if<CheckpointRecord>(&a)) return *x == std::get<CheckpointRecord>(b);
  return std::get<OutcomeRecord>(a) == std::get<OutcomeRecord>(b);
}

}  // namespace internal

// The first thing that differs between `a` and `b` (jobs, their counts and
// last change, every field of every task, past attempts, snapshots), in
// words; empty when none does.
inline std::string FirstDifference(const Scheduler& a, const Scheduler& b) {
  if (a.Jobs() != b.Jobs()) return "different job lists";
  for (JobId j : a.Jobs()) {
    const JobInfo x = a.GetJob(j).value();
    const JobInfo y = b.GetJob(j).value();
    const std::string job = "job " + std::to_string(j) + ": ";
    if (x.counts != y.counts) return job + "different counts";
    if (x.done != y.done) return job + "done differs";
    if (x.done && a.LastChange(j) != b.LastChange(j)) return job + "last change differs";
    const std::vector<TaskId> tasks = a.JobTasks(j).value();
    for (TaskId t : tasks) {
      const TaskInfo p = a.GetTask(t).value();
      const TaskInfo q = b.GetTask(t).value();
      const std::string task = "task " + t.ToString() + ": ";
      if (p.state != q.state) return task + "state";
      if (p.attempt != q.attempt) return task + "attempt";
      if (p.worker != q.worker) return task + "worker";
      if (p.reason != q.reason) return task + "reason \"" + p.reason + "\" vs \"" + q.reason + "\"";
      if (p.outcome != q.outcome) return task + "outcome";
      if ((p.checkpoint == nullptr) != (q.checkpoint == nullptr) ||
          (p.checkpoint && *p.checkpoint != *q.checkpoint)) {
        return task + "checkpoint";
      }
      if (p.started_at != q.started_at) return task + "started_at";
      if (p.finished_at != q.finished_at) return task + "finished_at";
      if (p.retry_at != q.retry_at) return task + "retry_at";
      if (p.cores != q.cores) return task + "cores";
      if (p.gpus != q.gpus) return task + "gpus";
      if (p.after != q.after) return task + "after";
      if (a.PastAttempts(t) != b.PastAttempts(t)) return task + "past attempts";
    }
  }
  if (a.Forgotten(a.Jobs().empty() ? 1 : a.Jobs().back() + 1) !=
      b.Forgotten(b.Jobs().empty() ? 1 : b.Jobs().back() + 1)) {
    return "forgotten ids differ";
  }
  const std::vector<Record> x = a.Snapshot();
  const std::vector<Record> y = b.Snapshot();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!internal::SameRecord(x[i], y[i])) {
      return "snapshot record " + std::to_string(i) + ": " + internal::Describe(x[i]) + " vs " +
             internal::Describe(y[i]);
    }
  }
  if (x.size() != y.size()) {
    return "snapshot sizes " + std::to_string(x.size()) + " vs " + std::to_string(y.size());
  }
  return "";
}

}  // namespace drover::core::testing

#endif  // DROVER_CORE_TESTING_RESTORE_CHECK_H_
