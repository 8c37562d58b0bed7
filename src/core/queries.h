// Query results: what the API shows about jobs, tasks and workers.
//
// Built on demand by Scheduler's query calls (copies; nothing points into
// the scheduler). Thread safety: plain values.
#ifndef DROVER_CORE_QUERIES_H_
#define DROVER_CORE_QUERIES_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/commands.h"
#include "core/model.h"
#include "core/resources.h"

namespace drover::core {

struct JobInfo {
  JobId id = 0;
  std::string name;
  std::string user;
  Time submitted_at;
  uint64_t task_count = 0;
  // Tasks in each state, indexed by static_cast<int>(TaskState).
  std::array<uint64_t, kTaskStateCount> counts{};
  // True when every task is succeeded, failed or canceled.
  bool done = false;
  uint64_t cached = 0;  // succeeded from the result cache, without running
  uint64_t cache_entries = 0;  // result cache entries naming its tasks (result_cache.h)
};

struct TaskInfo {
  TaskId id;
  std::string group;        // the group's name
  int64_t array_index = 0;
  TaskState state = TaskState::kQueued;
  uint32_t attempt = 0;     // attempts started so far (0 before the first)
  std::optional<WorkerId> worker;  // while assigned or running, else the last one
  std::string reason;       // why it failed / was canceled / is retrying
  EndKind reason_kind = EndKind::kNone;  // what `reason` says, for code
  Time submitted_at;
  std::optional<Time> started_at;   // of the latest attempt
  std::optional<Time> finished_at;  // of the latest attempt
  std::optional<Time> retry_at;     // queued and backing off until then
  std::optional<TaskOutcome> outcome;  // of the latest finished attempt
  std::shared_ptr<const Checkpoint> checkpoint;  // the latest saved; null: none
  // While assigned or running; once it ended (succeeded, failed,
  // canceled), what its latest attempt ran on (kept across a restart by the
  // terminal TaskRecord); none while queued again for a retry.
  std::vector<uint32_t> cores;
  std::vector<GpuGrant> gpus;
  // Assigned and waiting on its worker behind this task (queue-ahead):
  // it starts there when that one ends.
  std::optional<TaskId> after;
  // Its group's isolation beyond cores, memory and GPUs: a network of its
  // own (`network = "none"`) and disk I/O limits.
  bool private_network = false;
  IoLimits io;
  uint64_t disk_bytes = 0;  // `disk`: the most its directory may hold
  std::string image;        // the container image it runs in; empty: none
};

struct WorkerInfo {
  WorkerId id = 0;
  WorkerResources resources;
  bool drained = false;
  bool lost = false;
  // Its owner is at it (idle-desktop mode): it offers no room for now.
  bool paused = false;
  std::string note;  // "owner present; offers work after 15m idle", "owner away"
  Time note_since;   // when that became so
  std::vector<uint32_t> free_cores;
  uint64_t free_mem_bytes = 0;
  // Per GPU in resources.gpus order: hundredths still free, memory still free.
  std::vector<int64_t> gpu_free_share;
  std::vector<uint64_t> gpu_free_mem_bytes;
  std::map<std::string, int64_t> free_counters;
  std::vector<TaskId> tasks;        // assigned or running here, by task id
  WorkerUtilization utilization;
  Time last_heartbeat;
  // It refused an assignment; takes nothing new until its next heartbeat.
  bool refusing = false;
  // Its own checks say it should take no work: why, since when ("" healthy).
  std::string unhealthy;
  Time unhealthy_since;
  // Its GPUs out of the offer, found sick by its checks: index -> why.
  std::map<uint32_t, std::string> sick_gpus;
  // Quarantined as a black hole: until when, why ("" when not).
  std::string quarantine_why;
  Time quarantined_until;
  // Times it re-attached offering other resources than before, and when it
  // last did (0 / epoch: never).
  uint32_t offer_changes = 0;
  Time offer_changed_at;
};

// An attempt that ended with its task queued again (a retry, a lost
// worker, a refused or withdrawn assignment): Scheduler::PastAttempts.
struct PastAttempt {
  uint32_t attempt = 0;
  WorkerId worker = 0;
  std::optional<Time> started_at;  // unset: it never started
  Time ended_at;
  std::string reason;
  EndKind kind = EndKind::kNone;  // what `reason` says: preempted, rerun, ...
  std::optional<TaskOutcome> outcome;  // when the worker reported one
  friend bool operator==(const PastAttempt&, const PastAttempt&) = default;
};

}  // namespace drover::core

#endif  // DROVER_CORE_QUERIES_H_
