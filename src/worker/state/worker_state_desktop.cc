// WorkerState in idle-desktop mode: the owner comes, tasks are suspended,
// resumed or vacated, the owner goes (WorkerStateConfig::Desktop says the
// rules). Everything here runs on OwnerSample events, which come every few
// tens of milliseconds, so it needs no timer of its own.
#include <algorithm>
#include <chrono>
#include <utility>

#include "common/quantity.h"
#include "core/reasons.h"
#include "worker/state/worker_state.h"
#include "worker/state/worker_state_text.h"

namespace drover::worker {
namespace {

std::string Whole(Duration d) {
  return FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(d));
}

}  // namespace

void WorkerState::OnOwnerSample(Time now, const OwnerSample& sample, WorkerOutbox& out) {
  const WorkerStateConfig::Desktop& desktop = config_.desktop;
  // A new input in this sample: when it happened (never later than now).
  std::optional<Time> input_at;
  if (sample.last_input && (!last_input_ || *sample.last_input > *last_input_)) {
    last_input_ = sample.last_input;
    const Time at = std::min(*sample.last_input, now);
    if (at > quiet_since_) {
      quiet_since_ = at;
      input_at = at;
    }
  }
  const bool busy = sample.outside_load > desktop.max_outside_load;
  if (busy) quiet_since_ = now;
  const bool active = input_at.has_value() || busy;

  if (!owner_present_) {
    if (active) OwnerCame(now, input_at, out);
    return;
  }
  if (active && !frozen_ && SuspendAll(out) > 0) {
    // Back after a pause shorter than resume_after: the same presence.
    frozen_ = true;
    if (!vacate_at_) vacate_at_ = now + desktop.suspend_for;
    out.push_back(LogLine{LogLevel::kInfo, "owner active again: tasks suspended"});
    out.push_back(SendOwner{OwnerMessage(), input_at});
  }
  if (frozen_ && vacate_at_ && now >= *vacate_at_) VacateAll(now, out);
  const Duration quiet = now - quiet_since_;
  if (frozen_ && quiet >= desktop.resume_after) {
    ResumeAll(out);
    out.push_back(LogLine{LogLevel::kInfo, "owner quiet for " + Whole(quiet) + ": tasks resumed"});
  }
  if (quiet >= desktop.idle_after) OwnerLeft(now, out);
}

void WorkerState::OwnerCame(Time now, std::optional<Time> input_at, WorkerOutbox& out) {
  owner_present_ = true;
  owner_since_ = now;
  // A queue-ahead successor would start on its predecessor's room the
  // moment that one is vacated: it goes back to the server instead.
  for (auto it = queued_.begin(); it != queued_.end();) {
    const proto::Assignment dropped = std::move(it->second);
    it = queued_.erase(it);
    DropQueued(now, dropped, core::why::OwnerPresentBeforeStartText(config_.name), out);
  }
  const size_t suspended = SuspendAll(out);
  frozen_ = suspended > 0;
  vacate_at_ = now + config_.desktop.suspend_for;
  std::string line = std::string("owner present (") + (input_at ? "input" : "outside load") + ")";
  if (suspended > 0) {
    line += ": " + std::to_string(suspended) + " task(s) suspended; vacated in " +
            Whole(config_.desktop.suspend_for) + " unless quiet for " +
            Whole(config_.desktop.resume_after);
  }
  out.push_back(LogLine{LogLevel::kInfo, line});
  out.push_back(SendOwner{OwnerMessage(), suspended > 0 ? input_at : std::nullopt});
}

void WorkerState::OwnerLeft(Time now, WorkerOutbox& out) {
  if (frozen_) ResumeAll(out);  // resume_after longer than idle_after
  owner_present_ = false;
  owner_since_ = now;
  vacate_at_.reset();
  out.push_back(LogLine{LogLevel::kInfo,
                        "owner away for " + Whole(config_.desktop.idle_after) + ": offering work"});
  out.push_back(SendOwner{OwnerMessage(), std::nullopt});
}

size_t WorkerState::SuspendAll(WorkerOutbox& out) {
  size_t n = 0;
  for (auto& [task, run] : running_) {
    // Not yet started (no answer yet), ending (fenced, vacated) or
    // suspended already: nothing to do.
    if (run.started_at == Time{} || run.suspended || !run.fence_reason.empty() ||
        !run.vacate_reason.empty()) {
      continue;
    }
    run.suspended = true;
    out.push_back(SuspendTask{task, run.attempt});
    ++n;
  }
  return n;
}

void WorkerState::ResumeAll(WorkerOutbox& out) {
  frozen_ = false;
  for (auto& [task, run] : running_) {
    // One suspended because memory is low stays so until it recovers.
    if (!run.suspended || (run.memory_suspended && memory_low_)) continue;
    run.suspended = false;
    run.memory_suspended = false;
    out.push_back(ResumeTask{task, run.attempt});
  }
}

void WorkerState::VacateAll(Time now, WorkerOutbox& out) {
  frozen_ = false;
  vacate_at_.reset();
  const std::string reason = core::why::OwnerReturnedText(config_.name);
  out.push_back(LogLine{
      LogLevel::kInfo, "owner present for " + Whole(now - owner_since_) + ": vacating every task"});
  for (auto& [task, run] : running_) {
    if (!run.fence_reason.empty() || !run.vacate_reason.empty()) continue;
    VacateOne(task, run, reason, out);
  }
}

void WorkerState::VacateOne(TaskId task, Running& run, const std::string& reason,
                            WorkerOutbox& out) {
  run.vacate_reason = reason.empty() ? "preempted" : reason;
  run.suspended = false;  // the kill resumes it, so that its signal arrives
  run.memory_suspended = false;
  out.push_back(
      LogLine{LogLevel::kInfo, "vacating " + internal::AttemptName(task, run.attempt) + ": " + run.vacate_reason +
                                   " (signal " + std::to_string(run.vacate_signal) +
                                   ", then KILL after " + FormatDuration(run.vacate_grace) + ")"});
  out.push_back(KillTask{task, run.attempt, run.vacate_grace, /*fenced=*/false, run.vacate_signal});
}

void WorkerState::CheckMemory(uint64_t available, WorkerOutbox& out) {
  const bool low = available < config_.min_available_bytes;
  const std::string figures =
      FormatBytes(available) + " available, below " + FormatBytes(config_.min_available_bytes);
  if (!low) {
    if (memory_low_) out.push_back(LogLine{LogLevel::kInfo, "memory recovered: resuming"});
    memory_low_ = false;
    for (auto& [task, run] : running_) {
      if (!run.memory_suspended) continue;
      run.memory_suspended = false;
      // An owner who is at the machine keeps it frozen.
      if (frozen_) continue;
      run.suspended = false;
      out.push_back(ResumeTask{task, run.attempt});
    }
    return;
  }
  memory_low_ = true;
  // The youngest attempt still running, and the youngest suspended for
  // memory: the first low heartbeat suspends, the next vacates.
  auto youngest = [&](auto pred) {
    auto best = running_.end();
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      const Running& run = it->second;
      if (run.started_at == Time{} || !run.fence_reason.empty() || !run.vacate_reason.empty() ||
          !pred(run)) {
        continue;
      }
      if (best == running_.end() || run.started_at > best->second.started_at) best = it;
    }
    return best;
  };
  auto suspended = youngest([](const Running& run) { return run.memory_suspended; });
  if (suspended != running_.end()) {
    VacateOne(suspended->first, suspended->second,
              core::why::MemoryLowText(config_.name, figures), out);
    return;
  }
  auto running = youngest([](const Running& run) { return !run.suspended; });
  if (running == running_.end()) return;
  running->second.suspended = true;
  running->second.memory_suspended = true;
  out.push_back(LogLine{LogLevel::kWarn, "memory low (" + figures + "): suspended " +
                                             internal::AttemptName(running->first, running->second.attempt) +
                                             ", the youngest task"});
  out.push_back(SuspendTask{running->first, running->second.attempt});
}

proto::Owner WorkerState::OwnerMessage() const {
  proto::Owner owner;
  owner.present = owner_present_;
  owner.since = owner_since_;
  owner.note = owner_present_ ? "owner present; offers work after " +
                                    Whole(config_.desktop.idle_after) + " idle"
                              : "owner away";
  return owner;
}

}  // namespace drover::worker
