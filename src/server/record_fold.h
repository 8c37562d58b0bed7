// RecordFold: the latest state as journal records, for compaction.
//
// The journal holds every state change; replaying only the last one per task
// gives the same scheduler (core::Scheduler::Restore sets task fields from
// each record). The fold keeps, per job, its JobRecord, and per task its
// latest TaskRecord, its latest OutcomeRecord and, while it is running, the
// "assigned" TaskRecord that carries its cores and GPUs (restore keeps those
// booked only from an assigned record). Snapshot() lists them in an order
// Restore accepts: jobs by id, each job's tasks by index.
//
// Attempt history: an attempt that ended and sent its task back to the
// queue (a retry, a lost worker, a refused assignment) is kept as a
// PastAttempt (the last kMaxPastAttempts of a task), for the API's
// "attempts". The snapshot keeps them as the records they came from
// (running or assigned, its outcome, the queued record that ended it),
// before the task's latest records: replaying them is replaying the
// journal they were folded from, and folding them again gives them back.
// Tasks that ran once cost nothing extra.
//
// Retention: a JobRecord without a spec is a tombstone, written when a
// finished job is forgotten (Retention, --keep-finished). Folding one drops
// everything kept for that job; the snapshot then has none of its records,
// only, when the highest job id ever used was forgotten, one tombstone for
// that id, so a restarted server neither gives that id again nor takes an
// expired job for one that never was (highest_job()). Restoring skips
// tombstones (IsTombstone) and every record of a job a later tombstone
// names (ForgottenIn).
//
// Thread safety: none; the server's event loop owns it.
#ifndef DROVER_SERVER_RECORD_FOLD_H_
#define DROVER_SERVER_RECORD_FOLD_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/records.h"

namespace drover::server {

class RecordFold {
 public:
  void Add(const core::Record& record);
  // The current state as records; Restore(each) then FinishRestore rebuilds
  // the scheduler.
  std::vector<core::Record> Snapshot() const;

  // The spec of a job seen in a JobRecord; null when unknown.
  std::shared_ptr<const core::JobSpec> Spec(JobId job) const;

  // An attempt that ended with its task queued again.
  struct PastAttempt {
    uint32_t attempt = 0;
    WorkerId worker = 0;
    std::optional<Time> started_at;  // unset: it never started
    Time ended_at;
    std::string reason;
    std::optional<core::TaskOutcome> outcome;  // when the worker reported one
  };
  static constexpr size_t kMaxPastAttempts = 16;
  // The task's past attempts, oldest first (empty for an unknown task).
  std::vector<PastAttempt> PastAttempts(TaskId task) const;

  size_t job_count() const { return jobs_.size(); }

  // The highest job id any JobRecord (or tombstone) named; 0 before any.
  JobId highest_job() const { return highest_job_; }
  // When the job last changed (its latest record); nullopt for a job the
  // fold does not hold.
  std::optional<Time> LastChange(JobId job) const;

  // A JobRecord without a spec: a forgotten job.
  static bool IsTombstone(const core::Record& record);
  // The jobs the tombstones among `records` name.
  static std::set<JobId> ForgottenIn(const std::vector<core::Record>& records);
  // The job a record belongs to.
  static JobId JobOf(const core::Record& record);

 private:
  struct TaskRecords {
    std::optional<core::OutcomeRecord> outcome;
    std::optional<core::TaskRecord> assigned;  // while the latest is running
    std::optional<core::TaskRecord> latest;
    std::vector<PastAttempt> past;
  };
  struct JobRecords {
    core::JobRecord job;
    std::map<uint32_t, TaskRecords> tasks;
    Time last_change;
  };
  std::map<JobId, JobRecords> jobs_;
  JobId highest_job_ = 0;
  Time highest_forgotten_at_;  // the tombstone of highest_job_, when forgotten
};

}  // namespace drover::server

#endif  // DROVER_SERVER_RECORD_FOLD_H_
