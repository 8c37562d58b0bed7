// Commands: everything the scheduler wants done, as data.
//
// Scheduler::Handle appends commands to an Outbox; the shell executes them
// in order. Commands carry small ids and indices, never argv or env: the
// shell looks the spec up through AssignTask::spec when it builds a message.
//
// Ordering guarantees, per task:
//   ClaimLeases  -> (LeaseGranted event) -> AssignTask -> ... -> KillTask?
//   -> ReleaseLeases.
// AssignTask is never sent before the claim was granted. A lease set whose
// claim is still pending may be released at once (cancel); the shell must
// run the release after the claim it follows.
//
// Thread safety: plain values.
#ifndef DROVER_CORE_COMMANDS_H_
#define DROVER_CORE_COMMANDS_H_

#include <compare>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <memory>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/model.h"
#include "core/reasons.h"
#include "core/records.h"
#include "core/small_vector.h"

namespace drover::core {

// One key in the lease store (DESIGN.md section 4). The store shell formats
// it, e.g. `drover:lease:{worker}:slot:{task}` or `drover:lease:{worker}:gpu:{gpu}`.
enum class LeaseKind : uint8_t {
  kSlot = 0,      // the task's slot on the worker: lease:{worker}:slot:{task}
  kGpu = 1,       // a whole GPU: lease:{worker}:gpu:{gpu}
  kGpuShare = 2,  // a share of a GPU: lease:{worker}:gpu:{gpu}:share:{task}
};
struct LeaseKey {
  LeaseKind kind = LeaseKind::kSlot;
  WorkerId worker = 0;
  uint32_t gpu = 0;  // kGpu and kGpuShare
  TaskId task;       // kSlot and kGpuShare
  friend auto operator<=>(const LeaseKey&, const LeaseKey&) = default;
  // "lease:3:slot:12.4", "lease:3:gpu:1", "lease:3:gpu:1:share:12.4" (no prefix).
  std::string ToString() const;
};
// The keys of one task attempt: its slot key, then one per GPU it holds.
// Kept inline up to two (a slot and one GPU), so a claim or a release
// allocates nothing; iterate it, index it or view it as
// std::span<const LeaseKey> like a std::vector (small_vector.h).
using LeaseKeys = SmallVector<LeaseKey, 2>;

// Claim all `keys` atomically for `task` attempt `attempt`, owner = this
// scheduler, TTL `ttl`. Answer with LeaseGranted or LeaseRejected.
struct ClaimLeases {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  LeaseKeys keys;
  Duration ttl = Duration::zero();
};

// Run attempt `attempt` of `task` on `worker` with exactly these resources.
// What one finished dependency left for its dependents (AssignTask::inputs).
struct DependencyInput {
  TaskId task;
  std::string result;               // its $DROVER_RESULT, may be empty
  std::vector<OutputFile> outputs;  // its outputs, held on `outputs_on`
  WorkerId outputs_on = 0;
  std::vector<WorkerId> replicas;  // and copies of them on these
  friend bool operator==(const DependencyInput&, const DependencyInput&) = default;
};

struct AssignTask {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  CoreList cores;               // distinct core ids, ceil(cpus) of them
  uint64_t mem_limit_bytes = 0; // 0 = no limit
  GpuGrantList gpus;
  int64_t array_index = 0;      // DROVER_TASK_INDEX and "{index}"
  // The job's spec (its name, and in groups[group] the task's argv, env,
  // cpus for a CPU quota and timeout: Spec()). Valid until the scheduler
  // forgets the job (ForgetJob); the shell reads it while it carries the
  // command out.
  const JobSpec* job = nullptr;
  // Queue-ahead (SchedulerConfig::queue_ahead): start when attempt
  // `after_attempt` of `after` exits on this worker; its resources include
  // these. after_attempt 0: start now.
  TaskId after;
  uint32_t after_attempt = 0;
  uint16_t group = 0;
  // What the tasks of every group this task's group depends on left: their
  // results ($DROVER_RESULT) and outputs, by task id; tasks that left
  // neither are omitted. Null when there are none (most tasks: the command
  // stays small).
  std::shared_ptr<const std::vector<DependencyInput>> inputs;
  // The task's latest checkpoint (core/checkpoint.h), saved by an earlier
  // attempt, to restore before this one starts; null: none.
  std::shared_ptr<const Checkpoint> checkpoint;

  const TaskGroupSpec& Spec() const { return job->groups[group]; }
};

// Stop the attempt; the worker answers with TaskFinished as usual.
struct KillTask {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  Reason reason;  // why: kTimedOut "timed out after 2h", kCanceled "canceled by user"
  // Stop at once (KILL), not gracefully: the attempt must not run (its lease
  // expired, or the server does not count it as current).
  bool hard = false;
  // Queue-ahead take-back: drop the attempt only if it still waits on the
  // worker behind another; if it has started, let it run (the worker
  // reports it started as usual). A dropped one ends as TaskFinished with
  // never_started.
  bool only_queued = false;
  // Preemption: stop it the way the task asked to be vacated (its
  // vacate_signal, then KILL after its vacate_grace) rather than TERM and
  // the worker's grace.
  bool vacate = false;
};

// Extend the TTL of every listed key (all held leases of one worker).
struct RenewLeases {
  WorkerId worker = 0;
  std::vector<LeaseKey> keys;
  Duration ttl = Duration::zero();
};

// Compare-and-delete the task attempt's keys.
struct ReleaseLeases {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId worker = 0;
  LeaseKeys keys;
};

// Append to the journal. `Persist{TaskRecord{...}}` reads as before; the
// in-place form builds the record inside the command, which the scheduler
// uses on its hot path (a Persist made with no arguments and filled after
// would be zero-filled first, one made from a Record moves it).
struct Persist {
  Persist() {}  // user-provided, so a default Persist is not zero-filled first
  Persist(Record r) : record(std::move(r)) {}  // NOLINT(google-explicit-constructor)
  template <typename T, typename... Args>
  explicit Persist(std::in_place_type_t<T> type, Args&&... args)
      : record(type, std::forward<Args>(args)...) {}

  Record record;
};

// Tell subscribers (event stream, `drover wait`).
struct TaskStateChanged {
  TaskId task;
  TaskState from = TaskState::kQueued;
  TaskState to = TaskState::kQueued;
  uint32_t attempt = 0;
  std::string reason;
  EndKind kind = EndKind::kNone;  // what `reason` says, for code
  friend bool operator==(const TaskStateChanged&, const TaskStateChanged&) = default;
};

// Worker `to` should fetch `files`, the outputs of attempt `attempt` of
// `task`, from the workers that hold them (`from`: the holder first, then
// copies), keep them like its own outputs, and report OutputsReplicated.
// No answer is needed when it cannot: a copy that never arrives is not
// counted, and the next chance to make one comes when a holder is lost.
struct ReplicateOutputs {
  TaskId task;
  uint32_t attempt = 0;
  WorkerId to = 0;
  std::vector<WorkerId> from;
  std::vector<OutputFile> files;
  friend bool operator==(const ReplicateOutputs&, const ReplicateOutputs&) = default;
};

using Command = std::variant<ClaimLeases, AssignTask, KillTask, RenewLeases, ReleaseLeases, Persist,
                             TaskStateChanged, ReplicateOutputs>;

// The scheduler appends; the shell drains and clears (keeping capacity, so a
// driver loop allocates nothing for the outbox itself).
using Outbox = std::vector<Command>;

// One line describing a command, for tests and debug logs:
//   "claim 12.4#1 on w3 [lease:3:slot:12.4 lease:3:gpu:0]"
//   "assign 12.4#1 on w3 cores=[0,1] gpus=[0:100] mem=4 GiB"
//   "kill 12.4#1 on w3: timed out after 2h"
//   "vacate 12.4#1 on w3: preempted by 14.2 (priority 90)" (KillTask::vacate)
//   "renew w3 [lease:3:slot:12.4]"
//   "release 12.4#1 on w3 [lease:3:slot:12.4]"
//   "persist task 12.4 running #1 w3" / "persist job 12" / "persist outcome 12.4#1"
//   "state 12.4 queued->assigned #1" (+ ": reason" when there is one)
std::string DescribeCommand(const Command& command);

}  // namespace drover::core

#endif  // DROVER_CORE_COMMANDS_H_
