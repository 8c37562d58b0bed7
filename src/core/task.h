// The scheduler's per-task data: Task (one per task, in its job's flat
// vector), its TaskFlags, the Group and Job that hold tasks, the Active slot
// an attempt holds resources in while it is assigned or running, and the
// Extra side table for the few tasks with a string.
//
// Internal to src/core (scheduler_state.h gathers it with the other parts).
//
// Sizes matter here (BENCH.md B1): a task is a 40-byte struct in its job's
// flat vector plus a 16-byte queue entry while queued; everything with a
// string (reasons, outcomes, results) lives in an Extra only for the tasks
// that have one. Resources a task holds live in an Active slot only while
// it is assigned or running.
//
// Invariants (between events):
//  - Task::active is an Active slot exactly while the task is assigned or
//    running, and kNone otherwise; that slot's `task` names the task and
//    its `attempt` is the task's current attempt.
//  - An Active slot is in use while its attempt is non-zero; a free slot
//    (attempt 0, listed in State::free_actives) holds no resources.
//  - An Active on a worker (worker != kNone) is listed at `pos` in that
//    worker's `actives`; a restored one whose worker has not joined yet
//    has worker kNone and is listed in Adoption::orphans instead.
//  - `booked`: its alloc is counted in the worker's WorkerState. A waiter
//    (queue-ahead, `prev` set) is never booked: its alloc is part of its
//    predecessor's, booked when that one ends (queue_ahead.h).
//  - kBackoff and kParked are set only while the task is queued; the kill
//    reasons (kCancel, kTimedOut, kLeaseLost, kResized, kPreempted) and
//    kWithdraw belong to the current attempt, and the handlers that end an
//    attempt keep only kStaleEntry. kStaleEntry is set only while the task has a
//    dead entry left in its class queue (placed from behind the head).
//  - Group counters: `unmet` counts its dependencies (groups and --after)
//    not yet succeeded; `not_succeeded` its tasks not yet succeeded. Job
//    `counts` are the number of its tasks in each state.
//
// Changed by the handlers in scheduler.cc (lifecycle), leases.cc (Active
// slots: NewActive, EndActive), dispatch.cc, queue_ahead.cc and
// adoption.cc (placing and taking back attempts), restore.cc (replay).
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_TASK_H_
#define DROVER_CORE_TASK_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/checkpoint.h"
#include "core/model.h"
#include "core/ran_on.h"
#include "core/reasons.h"
#include "core/task_queue.h"
#include "core/worker_state.h"

namespace drover::core {

inline constexpr uint32_t kNone = UINT32_MAX;

// Task::flags: what a task is waiting for or why its kill was sent.
enum class TaskFlag : uint16_t {
  kBackoff = 1,     // queued, waiting for its retry timer
  kParked = 2,      // queued, parked on its user's quota list
  kCancel = 4,      // kill sent because of a cancel
  kTimedOut = 8,    // kill sent because of the timeout
  kLeaseLost = 16,  // kill sent because its lease vanished
  // Placed from behind its class head (backfill): its queue entry is still
  // queued, dead, until it reaches the head. Queued again before that, the
  // task takes that entry back instead of a second one.
  kStaleEntry = 32,
  // Queue-ahead take-back: its worker was asked to drop the attempt, which
  // waits there behind another, because room for it freed elsewhere first
  // (QueueAheadBook::holds keeps that room). Cleared when the attempt
  // starts anyway or its end comes back.
  kWithdraw = 64,
  // Hard kill sent because its worker re-attached with an offer that no
  // longer holds the attempt's cores, memory or GPUs: its end requeues it
  // without counting a failure (the worker changed, not the task).
  kResized = 128,
  // Vacating KillTask sent because a task of higher priority takes its room
  // (preemption.h): its end requeues it without using a retry, with the
  // preemption's reason.
  kPreempted = 256,
};

// A set of TaskFlags in two bytes. Has: that flag is set; Any: one of the
// flags is; KeepOnly: clears every flag but those.
class TaskFlags {
 public:
  constexpr TaskFlags() = default;
  constexpr TaskFlags(TaskFlag f) : bits_(static_cast<uint16_t>(f)) {}  // NOLINT: a flag is a set
  friend constexpr TaskFlags operator|(TaskFlags a, TaskFlags b) {
    TaskFlags out;
    out.bits_ = static_cast<uint16_t>(a.bits_ | b.bits_);
    return out;
  }
  constexpr bool Has(TaskFlag f) const { return (bits_ & static_cast<uint16_t>(f)) != 0; }
  constexpr bool Any(TaskFlags fs) const { return (bits_ & fs.bits_) != 0; }
  constexpr void Set(TaskFlags fs) { bits_ = static_cast<uint16_t>(bits_ | fs.bits_); }
  constexpr void Clear(TaskFlags fs) { bits_ = static_cast<uint16_t>(bits_ & ~fs.bits_); }
  constexpr void KeepOnly(TaskFlags fs) { bits_ = static_cast<uint16_t>(bits_ & fs.bits_); }

 private:
  uint16_t bits_ = 0;
};
constexpr TaskFlags operator|(TaskFlag a, TaskFlag b) { return TaskFlags(a) | TaskFlags(b); }

struct Task {
  int64_t started_us = 0;   // latest attempt
  int64_t finished_us = 0;  // latest attempt end (retry backoff counts from here)
  uint32_t active = kNone;  // Active slot while assigned/running
  WorkerId worker = 0;      // current or last worker
  uint16_t group = 0;
  uint16_t attempt = 0;   // claims made so far
  uint16_t failures = 0;  // failed attempts (retries used)
  TaskState state = TaskState::kWaiting;
  TaskFlags flags;
  uint8_t lost = 0;  // consecutive worker losses
  // Where its latest ended attempt ran (an index into State::ran_on;
  // RanOn::kNone when none): in the padding, so it costs no memory.
  uint32_t ran_on = RanOn::kNone;
};
static_assert(sizeof(Task) <= 40, "a task costs 40 bytes; ran_on lives in padding");

struct Group {
  uint32_t first = 0;  // index of its first task in the job
  uint32_t count = 0;
  uint32_t cls = 0;    // resource class
  uint32_t unmet = 0;  // dependencies (groups and --after) not yet satisfied
  uint32_t not_succeeded = 0;
  bool doomed = false;  // a dependency failed: its tasks were canceled
  std::vector<uint32_t> deps;
  std::vector<uint32_t> dependents;
};

struct Job {
  JobId id = 0;
  std::shared_ptr<const JobSpec> spec;
  uint32_t user = 0;
  Time submitted;
  std::vector<Group> groups;
  std::vector<Task> tasks;
  std::array<uint64_t, kTaskStateCount> counts{};
  uint64_t not_succeeded = 0;
  int64_t changed_us = 0;  // its latest record (Scheduler::LastChange)
  uint32_t cached = 0;     // tasks that succeeded from the result cache
  uint32_t cache_entries = 0;  // result cache entries naming its tasks
  bool forgotten = false;  // ForgetJob: the slot stays, the job is gone
};

// Resources held by one assigned or running task attempt.
struct Active {
  TaskRef task;
  uint32_t worker = kNone;  // worker slot; kNone for a restored orphan
  uint32_t pos = 0;         // index in the worker's actives list
  uint32_t attempt = 0;
  bool granted = false;
  bool lost = false;          // worker lost (or unknown after restore): awaiting expiry
  bool booked = false;        // resources are counted in the worker's WorkerState
  int64_t lease_from_us = 0;  // last claim or renewal sent
  // Queue-ahead links (SchedulerConfig::queue_ahead), Active slots or kNone.
  // `prev`: this attempt waits on its worker behind that one and takes over
  // part of its resources when it ends; until then it is not booked (its
  // alloc is a subset of prev's). `next`: the one waiting behind this.
  uint32_t prev = kNone;
  uint32_t next = kNone;
  // While it waits: its place in line when it left its queue (the queue
  // entry's seq; UINT64_MAX when restored or adopted: after every head).
  uint64_t wait_seq = 0;
  Allocation alloc;
};

// The key of a task's entries in State's side tables (Extra, past attempts,
// preemption counts).
inline uint64_t ExtraKey(TaskRef r) { return (uint64_t{r.job} << 32) | r.index; }

// What only some tasks have: a reason (failed, canceled, retried) and an
// outcome that is not a plain success. Keyed by ExtraKey.
struct Extra {
  std::string reason;
  EndKind reason_kind = EndKind::kNone;
  // Set by a cancel whose kill is on its way; the reason only once the task
  // is canceled (journaled then: until then the record keeps the old one).
  Reason cancel_reason;
  std::optional<TaskOutcome> outcome;
  uint32_t outcome_attempt = 0;  // the attempt `outcome` came from
  std::shared_ptr<const Checkpoint> checkpoint;  // the latest saved (checkpoints.cc)
  std::string cache_key;  // its result cache key, once ready (result_cache.h); "" none
};

}  // namespace drover::core

#endif  // DROVER_CORE_TASK_H_
