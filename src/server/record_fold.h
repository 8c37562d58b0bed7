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
// Thread safety: none; the server's event loop owns it.
#ifndef DROVER_SERVER_RECORD_FOLD_H_
#define DROVER_SERVER_RECORD_FOLD_H_

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/ids.h"
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

  size_t job_count() const { return jobs_.size(); }

 private:
  struct TaskRecords {
    std::optional<core::OutcomeRecord> outcome;
    std::optional<core::TaskRecord> assigned;  // while the latest is running
    std::optional<core::TaskRecord> latest;
  };
  struct JobRecords {
    core::JobRecord job;
    std::map<uint32_t, TaskRecords> tasks;
  };
  std::map<JobId, JobRecords> jobs_;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_RECORD_FOLD_H_
