// Reasons: why a task left a state other than by ordinary progress.
//
// A Reason is a kind, which code decides on (the REST API's attempt state,
// the simulator's counts, the event stream), and a text, which people read.
// Every text is rendered here from its kind and details, in one place, and
// nothing parses a text back: code that needs to know why looks at the kind.
//
// The kinds are journaled (TaskRecord) by their names, which are stable.
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_CORE_REASONS_H_
#define DROVER_CORE_REASONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/model.h"

namespace drover::core {

enum class EndKind : uint8_t {
  kNone = 0,      // no reason: ordinary progress
  kFailed,        // the attempt failed: exit code, signal, OOM or the worker's own reason
  kTimedOut,      // ran past its timeout
  kLeaseLost,     // its lease expired or was claimed by another
  kCanceled,      // by a user (or with its job)
  kDependency,    // a dependency failed, was canceled or lost its outputs for good
  kMissingInput,  // a dependency succeeded without an output it names
  kPreempted,     // a task of higher priority took its room
  kVacated,       // its worker took the room back (owner returned, memory low)
  kResized,       // its worker's offer no longer holds its resources
  kWorkerLost,    // its worker was lost with it
  kNotStarted,    // taken back before it started (refused, withdrawn, dropped)
  kRerun,         // a success whose outputs were lost, run again
  kRetried,       // a user retried its job
  kFenced,        // a worker runs an attempt the server does not count as current
};
inline constexpr int kEndKindCount = 15;

// "none", "failed", "timed_out", "lease_lost", "canceled", "dependency",
// "missing_input", "preempted", "vacated", "resized", "worker_lost",
// "not_started", "rerun", "retried", "fenced".
std::string_view EndKindName(EndKind kind);
std::optional<EndKind> EndKindFromName(std::string_view name);

struct Reason {
  EndKind kind = EndKind::kNone;
  std::string text;
  bool empty() const { return kind == EndKind::kNone && text.empty(); }
  friend bool operator==(const Reason&, const Reason&) = default;
};

namespace why {

// The attempt's own failure, from the worker's outcome and the memory limit
// it ran under: "exit code 3", "killed by signal 9", "OOM-killed (limit
// 1 GiB, peak 1 GiB)", each followed by the worker's reason where it gave
// one. Empty (kNone) for a success.
Reason Failed(const TaskOutcome& outcome, uint64_t mem_limit_bytes);
// "REASON; retry 2 of 3 in 4s": a failure that will be retried.
Reason WithRetry(Reason failure, uint32_t retry, uint32_t retries, Duration backoff);

Reason TimedOut(Duration limit);    // "timed out after 2h"
Reason LeaseExpiredWhileRunning();  // "lease expired while running"
Reason LeaseExpired();              // "lease expired" (its stop)
// "lease claim rejected": the stop of one that ran (kLeaseLost), or one
// that never started (kNotStarted).
Reason LeaseRejected(bool ran);
Reason StoppedBeforeReattach(EndKind kind);  // "stopped before it re-attached"

Reason CanceledByUser();  // "canceled by user"
// "dependency 12.0 failed" / "... canceled".
Reason DependencyEnded(TaskId dependency, TaskState state);
Reason DependencyJobFailed(JobId dependency);  // "dependency job 12 failed"
// "dependency 12.0 lost its outputs with worker 3 and cannot run again".
Reason DependencyCannotRerun(TaskId dependency, const std::vector<WorkerId>& holders);
Reason MissingInput(std::string detail);  // the input selector's own words

// "preempted by 14.2 (priority 90)", or "preempted" when the preemptor is
// no longer known.
Reason PreemptedBy(std::optional<TaskId> by, int32_t by_priority);
// A vacate, in the worker's words ("preempted: owner returned on ws-ana").
Reason Vacated(std::string_view worker_text);
// The worker's words for how an attempt ended there, carried as the
// outcome's reason (with `vacated` or `never_started` where they apply):
// its vacates,
std::string OwnerReturnedText(std::string_view worker);
std::string MemoryLowText(std::string_view worker, std::string_view figures);
// its fencing ("fenced: no contact with the server for 26 s"; by the
// reaper's watchdog when the worker itself did not run),
std::string FencedText(Duration without_contact);
std::string FencedByWatchdogText();
// what it dropped before it started ("canceled before it started: WHY",
// "withdrawn before it started: WHY"; a successor whose predecessor's
// other attempt ended; one queued on a workstation whose owner came back),
std::string CanceledBeforeStartText(std::string_view why);
std::string WithdrawnBeforeStartText(std::string_view why);
std::string PredecessorEndedInsteadText(TaskId predecessor, uint32_t attempt);
std::string OwnerPresentBeforeStartText(std::string_view worker);
// and outputs it would not keep ("outputs refused: WHY").
std::string OutputsRefusedText(std::string_view why);

// "stopped: worker 3 no longer offers its cores, memory or GPUs" for one that
// ran; without "stopped: " for one that never started.
Reason Resized(WorkerId worker, bool ran);

Reason WorkerLost();                             // "worker lost"
Reason WorkerLostTooOften(uint32_t attempts);    // "worker lost (3 attempts)"
Reason ReattachedWithout(WorkerId worker, bool ran);  // "worker 3 re-attached without it ..."

// Taken back before it started.
Reason DroppedBeforeStart(std::string_view worker_text);  // the worker's words, or "dropped ..."
Reason RefusedBy(WorkerId worker, std::string_view worker_text);
Reason NotStartedWithin(WorkerId worker, Duration bound);     // its stop
Reason NotStartedWithinTakenBack(WorkerId worker, Duration bound);
Reason MovedBeforeSent(const Reason& why_moved);
Reason RoomFreedOn(WorkerId worker);    // "room freed first on worker 3"
Reason RoomFreedElsewhere();            // "room freed first on another worker"
Reason DisplacedBy(TaskId by, int32_t priority);

Reason Rerun(const std::vector<WorkerId>& holders);  // "rerun: outputs lost with worker 3"
// "rerun: its outputs failed their SHA-256 check from worker 3"
Reason RerunCorrupt(WorkerId holder);
Reason Retried(std::string_view by);                  // "retried" / "retried by ana"

// The stop of an attempt a re-attached worker runs that the server does not
// count as current: "unknown task", "not current on the server", "queued,
// not current on the server", "its resources are taken on this worker".
enum class Fence : uint8_t { kUnknownTask, kNotCurrent, kQueuedNotCurrent, kResourcesTaken };
Reason Fenced(Fence why);

}  // namespace why
}  // namespace drover::core

#endif  // DROVER_CORE_REASONS_H_
