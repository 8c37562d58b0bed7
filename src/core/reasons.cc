#include "core/reasons.h"

#include <array>

#include "common/quantity.h"

namespace drover::core {

namespace {

constexpr std::array<std::string_view, kEndKindCount> kNames = {
    "none",          "failed",    "timed_out", "lease_lost",  "canceled",
    "dependency",    "missing_input", "preempted", "vacated", "resized",
    "worker_lost",   "not_started", "rerun",   "retried",   "fenced",
};

// "worker 3", or "workers 3, 5".
std::string WorkersText(const std::vector<WorkerId>& holders) {
  std::string s = holders.size() == 1 ? "worker " : "workers ";
  for (size_t i = 0; i < holders.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(holders[i]);
  }
  return s;
}

std::string Worker(WorkerId w) { return "worker " + std::to_string(w); }

}  // namespace

std::string_view EndKindName(EndKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kNames.size() ? kNames[i] : "none";
}

std::optional<EndKind> EndKindFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<EndKind>(i);
  }
  return std::nullopt;
}

namespace why {

Reason Failed(const TaskOutcome& o, uint64_t mem_limit_bytes) {
  std::string text;
  if (o.oom_killed) {
    text = "OOM-killed (limit " +
           (mem_limit_bytes ? FormatBytes(mem_limit_bytes) : std::string("none")) + ", peak " +
           FormatBytes(o.usage.peak_mem_bytes) + ")";
  } else if (o.signal != 0) {
    text = "killed by signal " + std::to_string(o.signal);
  } else if (o.exit_code == -1 && !o.reason.empty()) {
    // No exit status (no process can exit with -1): the attempt did not run
    // normally, and the worker's reason says why.
  } else if (o.exit_code != 0) {
    text = "exit code " + std::to_string(o.exit_code);
  }
  if (!o.reason.empty()) text = text.empty() ? o.reason : text + "; " + o.reason;
  if (text.empty()) return {};
  return {EndKind::kFailed, std::move(text)};
}

Reason WithRetry(Reason failure, uint32_t retry, uint32_t retries, Duration backoff) {
  failure.text += "; retry " + std::to_string(retry) + " of " + std::to_string(retries) + " in " +
                  FormatDuration(backoff);
  return failure;
}

Reason TimedOut(Duration limit) {
  return {EndKind::kTimedOut, "timed out after " + FormatDuration(limit)};
}
Reason LeaseExpiredWhileRunning() { return {EndKind::kLeaseLost, "lease expired while running"}; }
Reason LeaseExpired() { return {EndKind::kLeaseLost, "lease expired"}; }
Reason LeaseRejected(bool ran) {
  return {ran ? EndKind::kLeaseLost : EndKind::kNotStarted, "lease claim rejected"};
}
Reason StoppedBeforeReattach(EndKind kind) { return {kind, "stopped before it re-attached"}; }

Reason CanceledByUser() { return {EndKind::kCanceled, "canceled by user"}; }

Reason DependencyEnded(TaskId dependency, TaskState state) {
  return {EndKind::kDependency,
          "dependency " + dependency.ToString() + " " + std::string(TaskStateName(state))};
}

Reason DependencyJobFailed(JobId dependency) {
  return {EndKind::kDependency, "dependency job " + std::to_string(dependency) + " failed"};
}

Reason DependencyCannotRerun(TaskId dependency, const std::vector<WorkerId>& holders) {
  return {EndKind::kDependency, "dependency " + dependency.ToString() + " lost its outputs with " +
                                    WorkersText(holders) + " and cannot run again"};
}

Reason MissingInput(std::string detail) { return {EndKind::kMissingInput, std::move(detail)}; }

Reason PreemptedBy(std::optional<TaskId> by, int32_t by_priority) {
  if (!by) return {EndKind::kPreempted, "preempted"};
  return {EndKind::kPreempted, "preempted by " + by->ToString() + " (priority " +
                                   std::to_string(by_priority) + ")"};
}

Reason Vacated(std::string_view worker_text) {
  return {EndKind::kVacated, worker_text.empty() ? std::string("preempted: vacated by its worker")
                                                 : std::string(worker_text)};
}

std::string OwnerReturnedText(std::string_view worker) {
  return "preempted: owner returned on " + std::string(worker);
}

std::string MemoryLowText(std::string_view worker, std::string_view figures) {
  return "preempted: memory low on " + std::string(worker) + " (" + std::string(figures) + ")";
}

std::string FencedText(Duration without_contact) {
  const int64_t tenths =
      std::chrono::duration_cast<std::chrono::milliseconds>(without_contact).count() / 100;
  std::string seconds = std::to_string(tenths / 10);
  if (tenths % 10 != 0) seconds += "." + std::to_string(tenths % 10);
  return "fenced: no contact with the server for " + seconds + " s";
}

std::string FencedByWatchdogText() {
  return "fenced: the worker was stopped or stalled past its fencing deadline, so its reaper "
         "killed the task before its lease could expire";
}

std::string CanceledBeforeStartText(std::string_view why) {
  return "canceled before it started: " + std::string(why);
}

std::string WithdrawnBeforeStartText(std::string_view why) {
  return "withdrawn before it started: " + std::string(why);
}

std::string OwnerPresentBeforeStartText(std::string_view worker) {
  return "dropped before it started: its owner is at " + std::string(worker);
}

std::string PredecessorEndedInsteadText(TaskId predecessor, uint32_t attempt) {
  return CanceledBeforeStartText("attempt " + std::to_string(attempt) + " of " +
                                 predecessor.ToString() + " ended instead");
}

std::string OutputsRefusedText(std::string_view why) {
  return "outputs refused: " + std::string(why);
}

Reason Resized(WorkerId worker, bool ran) {
  std::string text = Worker(worker) + " no longer offers its cores, memory or GPUs";
  if (ran) return {EndKind::kResized, "stopped: " + text};
  return {EndKind::kNotStarted, std::move(text)};
}

Reason WorkerLost() { return {EndKind::kWorkerLost, "worker lost"}; }

Reason WorkerLostTooOften(uint32_t attempts) {
  return {EndKind::kWorkerLost, "worker lost (" + std::to_string(attempts) + " attempts)"};
}

Reason ReattachedWithout(WorkerId worker, bool ran) {
  if (ran) return {EndKind::kWorkerLost, Worker(worker) + " re-attached without it"};
  return {EndKind::kNotStarted,
          Worker(worker) + " re-attached without it (the assignment did not reach it)"};
}

Reason DroppedBeforeStart(std::string_view worker_text) {
  return {EndKind::kNotStarted, worker_text.empty() ? std::string("dropped before it started")
                                                    : std::string(worker_text)};
}

Reason RefusedBy(WorkerId worker, std::string_view worker_text) {
  return {EndKind::kNotStarted, "refused by " + Worker(worker) + ": " + std::string(worker_text)};
}

Reason NotStartedWithin(WorkerId worker, Duration bound) {
  return {EndKind::kNotStarted,
          Worker(worker) + " did not start it within " + FormatDuration(bound)};
}

Reason NotStartedWithinTakenBack(WorkerId worker, Duration bound) {
  Reason r = NotStartedWithin(worker, bound);
  r.text += "; taken back";
  return r;
}

Reason MovedBeforeSent(const Reason& why_moved) {
  return {EndKind::kNotStarted, "moved before it was sent: " + why_moved.text};
}

Reason RoomFreedOn(WorkerId worker) {
  return {EndKind::kNotStarted, "room freed first on " + Worker(worker)};
}

Reason RoomFreedElsewhere() { return {EndKind::kNotStarted, "room freed first on another worker"}; }

Reason DisplacedBy(TaskId by, int32_t priority) {
  return {EndKind::kNotStarted, "task " + by.ToString() + " of higher priority (" +
                                    std::to_string(priority) + ") takes its place"};
}

Reason Rerun(const std::vector<WorkerId>& holders) {
  return {EndKind::kRerun, "rerun: outputs lost with " + WorkersText(holders)};
}

Reason RerunCorrupt(WorkerId holder) {
  return {EndKind::kRerun,
          "rerun: its outputs failed their SHA-256 check from worker " + std::to_string(holder)};
}

Reason Retried(std::string_view by) {
  return {EndKind::kRetried, by.empty() ? std::string("retried") : "retried by " + std::string(by)};
}

Reason Fenced(Fence why) {
  switch (why) {
    case Fence::kUnknownTask: return {EndKind::kFenced, "unknown task"};
    case Fence::kNotCurrent: return {EndKind::kFenced, "not current on the server"};
    case Fence::kQueuedNotCurrent: return {EndKind::kFenced, "queued, not current on the server"};
    case Fence::kResourcesTaken:
      return {EndKind::kFenced, "its resources are taken on this worker"};
  }
  return {EndKind::kFenced, "not current on the server"};
}

}  // namespace why
}  // namespace drover::core
