// Records: the durable description of every state change.
//
// The scheduler emits one Persist command per change; the shell serialises
// the record into its journal (file or Redis stream). Feeding the same
// records, in order, to Scheduler::Restore of a fresh scheduler rebuilds all
// jobs and task states (see scheduler.h for what happens to tasks that were
// assigned or running).
//
// Thread safety: plain values.
#ifndef DROVER_CORE_RECORDS_H_
#define DROVER_CORE_RECORDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/checkpoint.h"
#include "core/model.h"
#include "core/reasons.h"
#include "core/resources.h"

namespace drover::core {

// A job was accepted; its tasks start waiting or queued. Without a spec it
// is a tombstone: the job was forgotten (retention, Scheduler::ForgetJob).
struct JobRecord {
  JobId job = 0;
  std::shared_ptr<const JobSpec> spec;
  Time at;
};

// A task moved to `state`. `worker` is meaningful for assigned and running;
// `attempt` counts from 1 once the task was first assigned (0 before).
struct TaskRecord {
  TaskId task;
  TaskState state = TaskState::kQueued;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  Time at;
  std::string reason;  // empty for ordinary progress
  uint32_t failures = 0;  // failed attempts so far (retries used)
  // For assigned: the concrete resources, so a restored scheduler can keep
  // them booked when the worker comes back. Empty otherwise.
  std::vector<uint32_t> cores;
  std::vector<GpuGrant> gpus;
  // For assigned with queue-ahead: the attempt whose resources it takes
  // over when that one ends (AssignTask::after); after_attempt 0: none.
  TaskId after;
  uint32_t after_attempt = 0;
  // For queued and terminal: when the task's latest attempt that started
  // started (zero: none did), so a restore from a snapshot, which keeps no
  // running record of an ended attempt, still knows it.
  Time started;
  EndKind kind = EndKind::kNone;  // what `reason` says, for code
  friend bool operator==(const TaskRecord&, const TaskRecord&) = default;
};

// An attempt ended with this outcome (written before the TaskRecord that
// moves the task on).
struct OutcomeRecord {
  TaskId task;
  uint32_t attempt = 0;
  TaskOutcome outcome;
  Time at;
  friend bool operator==(const OutcomeRecord&, const OutcomeRecord&) = default;
};

// The task's latest checkpoint (CheckpointSaved accepted); replaces the
// one before.
struct CheckpointRecord {
  TaskId task;
  Checkpoint checkpoint;
  friend bool operator==(const CheckpointRecord&, const CheckpointRecord&) = default;
};

using Record = std::variant<JobRecord, TaskRecord, OutcomeRecord, CheckpointRecord>;

// Where a snapshot taken in slices stands (Scheduler::StartSnapshot).
struct SnapshotCursor {
  std::vector<JobId> jobs;  // the jobs when it started, ascending
  size_t tasks = 0;         // theirs, all told (what to reserve for the records)
  size_t job = 0;           // jobs[job] is being taken
  uint32_t task = 0;        // its next task
  bool in_job = false;      // jobs[job]'s own record was taken
  bool begun = false;       // the first slice was taken
};

}  // namespace drover::core

#endif  // DROVER_CORE_RECORDS_H_
