// WorkerState's link to the server and its fencing: connect, hello, the
// heartbeat and idle checks, the finished-task journal it flushes, and the
// fence that stops every task when the server stays out of reach
// (worker_state.h).
#include "worker/state/worker_state.h"
#include <algorithm>
#include <iterator>
#include <type_traits>
#include <utility>
#include "common/quantity.h"
#include "core/reasons.h"
#include "worker/state/agent_convert.h"
#include "worker/state/worker_state_text.h"

namespace drover::worker {

using internal::AttemptName;
using internal::Log;

// ---- the link ----------------------------------------------------------------

void WorkerState::OnLinkUp(WorkerOutbox& out) {
  proto::Hello hello;
  hello.worker_name = config_.name;
  hello.previous_id = worker_id_;
  hello.agent_version = config_.agent_version;
  hello.key = config_.key;
  hello.resources = config_.resources;
  hello.files_port = config_.files_port;
  hello.files_fingerprint = config_.files_fingerprint;
  hello.batches = config_.batches;
  hello.argv_ids = config_.argv_ids;
  hello.binary = config_.binary;
  hello.running = RunningTasks();
  sent_this_session_.clear();
  for (const auto& [attempt, finished] : unacked_) {
    hello.finished.push_back(finished);
    sent_this_session_.insert(attempt);
  }
  out.push_back(SendMessage{std::move(hello)});
}

void WorkerState::OnLinkDown(Time now, WorkerOutbox& out) {
  if (established_) {
    // The link was alive (pings answered) until at most one idle timeout
    // before it was declared dead.
    Contact(now - 2 * heartbeat_, out);
  }
  established_ = false;
  sent_this_session_.clear();
  // The next server takes back what was fetching at its hello (the shell
  // drops those fetches).
  fetching_.clear();
  out.push_back(CancelTimer{WorkerTimer::kHeartbeat});
}

void WorkerState::OnHelloAck(Time now, const proto::HelloAck& ack, WorkerOutbox& out) {
  established_ = true;
  worker_id_ = ack.worker;
  Result<FencingPolicy> fence = FencingPolicy::Create(ack.lease_ttl, ack.heartbeat_interval, now);
  if (fence.ok()) {
    heartbeat_ = ack.heartbeat_interval;
    lease_ttl_ = ack.lease_ttl;
    fence_ = *fence;
    // The timer may still be set for the start-up timing's later deadline
    // (a 30 s lease): a link lost now must fence by the server's TTL.
    ArmFence(out);
  } else {
    Log(out, LogLevel::kWarn,
        "ignoring the server's timing (" + fence.status().message() + "); keeping heartbeat " +
            std::to_string(heartbeat_.count() / 1000) + " ms, lease " +
            std::to_string(lease_ttl_.count() / 1000) + " ms");
  }
  Contact(now, out);
  // The server's timing replaces the start-up one (a 30 s lease): the
  // reaper's deadline and the tick move with it now, not a tick later.
  OnWatchdog(now, out);
  Log(out, LogLevel::kInfo,
      "attached as worker " + std::to_string(ack.worker) + " (server " + ack.server_instance +
          "), " + std::to_string(running_.size()) + " running, " +
          std::to_string(queued_.size()) + " queued, " + std::to_string(unacked_.size()) +
          " results to report");
  // Results that ended between the Hello and now were not in it.
  for (const auto& [attempt, finished] : unacked_) {
    if (sent_this_session_.insert(attempt).second) finished_out_.push_back(finished);
  }
  PostFlush(out);
  // Leaving when the link broke: the new session is told again.
  if (leaving_) out.push_back(SendMessage{proto::Drain{true, "leaving"}});
  // Where the owner is: the server counts a worker that joins as offering.
  if (config_.desktop.enabled) out.push_back(SendOwner{OwnerMessage(), std::nullopt});
  // Unhealthy: said before the server places anything here.
  if (!unhealthy_.empty() || !sick_gpus_.empty()) out.push_back(SendMessage{MakeHeartbeat()});
  out.push_back(ArmTimer{WorkerTimer::kHeartbeat, now + heartbeat_});
}

proto::Heartbeat WorkerState::MakeHeartbeat() const {
  proto::Heartbeat heartbeat;
  heartbeat.utilization = utilization_;
  heartbeat.running = RunningAttempts();
  heartbeat.unhealthy = unhealthy_;
  heartbeat.unhealthy_kind = unhealthy_.empty() ? "" : unhealthy_kind_;
  heartbeat.sick_gpus = sick_gpus_;
  return heartbeat;
}

void WorkerState::OnHealth(const HealthChecked& e, WorkerOutbox& out) {
  if (e.unhealthy == unhealthy_ && e.sick_gpus == sick_gpus_) return;
  if (e.unhealthy != unhealthy_) {
    if (e.unhealthy.empty()) {
      Log(out, LogLevel::kInfo, "healthy again: taking work");
    } else {
      Log(out, LogLevel::kWarn,
          "unhealthy: " + e.unhealthy + "; taking no new work, running tasks go on");
    }
  }
  for (const auto& [index, why] : e.sick_gpus) {
    if (sick_gpus_.count(index) == 0) {
      Log(out, LogLevel::kWarn,
          "GPU " + std::to_string(index) + " is sick: " + why + "; out of the offer");
    }
  }
  for (const auto& [index, why] : sick_gpus_) {
    if (e.sick_gpus.count(index) == 0) {
      Log(out, LogLevel::kInfo, "GPU " + std::to_string(index) + " is well again");
    }
  }
  unhealthy_ = e.unhealthy;
  unhealthy_kind_ = e.kind;
  sick_gpus_ = e.sick_gpus;
  if (established_) out.push_back(SendMessage{MakeHeartbeat()});
}

void WorkerState::OnHeartbeat(Time now, const HeartbeatDue& due, WorkerOutbox& out) {
  if (!established_) return;
  if (due.utilization) utilization_ = *due.utilization;
  if (due.utilization && due.utilization->disk_free_bytes) {
    disk_free_ = due.utilization->disk_free_bytes;
  }
  out.push_back(SendMessage{MakeHeartbeat()});
  if (config_.min_available_bytes > 0 && due.available_bytes) {
    CheckMemory(*due.available_bytes, out);
  }
  if (config_.idle_timeout > Duration::zero()) CheckIdle(now, out);
  out.push_back(ArmTimer{WorkerTimer::kHeartbeat, now + heartbeat_});
}

void WorkerState::CheckIdle(Time now, WorkerOutbox& out) {
  if (!running_.empty() || !queued_.empty() || !unacked_.empty() || !exited_.empty()) {
    idle_since_.reset();  // after a Drain too: a task assigned before it runs first
    return;
  }
  if (!idle_since_) {
    idle_since_ = now;
    return;
  }
  const std::string idle =
      "idle for " +
      FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *idle_since_));
  if (leaving_) {
    // A heartbeat after the Drain: an assignment the server sent before
    // it had arrived by now.
    out.push_back(Leave{idle});
  } else if (now - *idle_since_ >= config_.idle_timeout) {
    leaving_ = true;
    out.push_back(SendMessage{proto::Drain{true, idle + ": leaving"}});
    out.push_back(LogLine{LogLevel::kInfo, idle + " (--idle-timeout " +
                                               FormatDuration(config_.idle_timeout) +
                                               "): drained, leaving at the next heartbeat"});
  }
}

// ---- fencing -------------------------------------------------------------------

void WorkerState::Contact(Time when, WorkerOutbox& out) {
  fence_.OnServerContact(when);
  last_contact_ = std::max(last_contact_, when);
  if (!fence_armed_) ArmFence(out);
}

void WorkerState::ArmFence(WorkerOutbox& out) {
  fence_armed_ = true;
  out.push_back(ArmTimer{WorkerTimer::kFence, fence_.deadline() + Millis(1)});
}

void WorkerState::OnFence(Time now, WorkerOutbox& out) {
  if (established_) {
    // An open, answered connection is contact (agent.h); Contact re-arms.
    return Contact(now, out);
  }
  if (!fence_.ShouldFence(now)) return ArmFence(out);
  const std::string reason = core::why::FencedText(now - last_contact_);
  // Queued successors first, so that no fenced predecessor's exit can
  // start one: they never run, and are reported finished with the reason.
  if (!queued_.empty()) {
    Log(out, LogLevel::kError,
        reason + "; dropping " + std::to_string(queued_.size()) + " queued tasks");
    std::map<TaskId, proto::Assignment> dropped = std::exchange(queued_, {});
    for (const auto& [predecessor, queued] : dropped) DropQueued(now, queued, reason, out);
  }
  std::vector<TaskId> victims;
  for (auto& [task, run] : running_) {
    if (run.fence_reason.empty()) victims.push_back(task);
  }
  if (victims.empty()) return;  // re-armed by the next contact
  Log(out, LogLevel::kError,
      reason + "; killing " + std::to_string(victims.size()) +
          " running tasks (their leases are about to expire)");
  for (const TaskId& task : victims) {
    Running& run = running_[task];
    run.fence_reason = reason;
    out.push_back(KillTask{task, run.attempt, Duration::zero(), /*fenced=*/true});
  }
}

// The reaper's watchdog deadline is half a heartbeat after where this
// worker would fence (so a running worker fences first, with its own
// reason, and the reaper still acts 1.5 heartbeats before the lease can
// expire): while an answered connection is open (contact, see OnFence),
// one budget from now; without one, the fencing deadline. A tick that comes
// late (the worker did not run for a while: SIGSTOP, a stall, swap) proves
// nothing about the link, so it does not move the deadline: the reaper may
// fire meanwhile, which is the point.
void WorkerState::OnWatchdog(Time now, WorkerOutbox& out) {
  const Duration budget = fence_.budget();
  const Duration tick =
      std::max<Duration>(Millis(20), std::min<Duration>(heartbeat_, budget / 4));
  const bool late = now - last_watchdog_tick_ > std::max<Duration>(2 * tick, budget / 2);
  last_watchdog_tick_ = now;
  if (!late) {
    const Time deadline = (established_ ? now + budget : fence_.deadline()) + heartbeat_ / 2;
    out.push_back(SetReaperDeadline{deadline - now});
  }
  out.push_back(ArmTimer{WorkerTimer::kWatchdog, now + tick});
}

std::vector<proto::TaskAttempt> WorkerState::RunningAttempts() const {
  std::vector<proto::TaskAttempt> out;
  for (const auto& [task, run] : running_) {
    // A fenced attempt is being killed and is reported as finished instead.
    if (run.fence_reason.empty()) out.push_back(proto::TaskAttempt{task, run.attempt});
  }
  return out;
}

std::vector<proto::RunningTask> WorkerState::RunningTasks() const {
  std::vector<proto::RunningTask> out;
  for (const auto& [task, run] : running_) {
    if (run.fence_reason.empty()) {
      out.push_back(proto::RunningTask{task, run.attempt, run.cores, run.gpus});
    }
  }
  // Queued successors too, so the server can confirm (or kill) each one.
  for (const auto& [predecessor, a] : queued_) {
    out.push_back(proto::RunningTask{a.task, a.attempt, a.cores, a.gpus, /*queued=*/true});
  }
  return out;
}

}  // namespace drover::worker
