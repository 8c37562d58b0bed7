#include "worker/state/worker_state.h"

#include <algorithm>
#include <iterator>
#include <type_traits>
#include <utility>

#include "common/quantity.h"
#include "worker/state/agent_convert.h"

namespace drover::worker {
namespace {

std::string AttemptName(TaskId task, uint32_t attempt) {
  return task.ToString() + "#" + std::to_string(attempt);
}

void Log(WorkerOutbox& out, LogLevel level, std::string text) {
  out.push_back(LogLine{level, std::move(text)});
}

std::string TimerName(WorkerTimer timer) {
  switch (timer) {
    case WorkerTimer::kHeartbeat: return "heartbeat";
    case WorkerTimer::kFence: return "fence";
    case WorkerTimer::kWatchdog: return "watchdog";
  }
  return "?";
}

// "+1500ms", "-5ms".
std::string Offset(Duration d) {
  return (d < Duration::zero() ? "" : "+") + std::to_string(d.count() / 1000) + "ms";
}

// "12.0#1 (never started) (fenced: ...)".
std::string Describe(const proto::FinishedTask& f) {
  std::string text = AttemptName(f.task, f.attempt);
  if (f.never_started) text += " (never started)";
  if (!f.outcome.reason.empty()) text += " (" + f.outcome.reason + ")";
  return text;
}

std::string DescribeMessage(const proto::WorkerMessage& message, Time now) {
  return std::visit(
      [&](const auto& m) -> std::string {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, proto::Hello>) {
          std::string line = "hello";
          for (const proto::RunningTask& r : m.running) {
            line += (r.queued ? " queued " : " running ") + AttemptName(r.task, r.attempt);
          }
          for (const proto::FinishedTask& f : m.finished) line += " finished " + Describe(f);
          return line;
        } else if constexpr (std::is_same_v<T, proto::Heartbeat>) {
          std::string line = "heartbeat";
          for (const proto::TaskAttempt& a : m.running) line += " " + AttemptName(a.task, a.attempt);
          return line;
        } else if constexpr (std::is_same_v<T, proto::Started>) {
          std::string line = "started";
          for (const proto::StartedTask& s : m.tasks) {
            line += " " + AttemptName(s.task, s.attempt) + "@" + Offset(s.started_at - now);
          }
          return line;
        } else if constexpr (std::is_same_v<T, proto::Finished>) {
          std::string line = "finished";
          for (const proto::FinishedTask& f : m.tasks) line += " " + Describe(f);
          return line;
        } else if constexpr (std::is_same_v<T, proto::Refused>) {
          return "refused " + AttemptName(m.task, m.attempt) + ": " + m.reason;
        } else {
          return std::string(proto::MessageTypeName(message));
        }
      },
      message);
}

}  // namespace

std::string DescribeCommand(const WorkerCommand& command, Time now) {
  return std::visit(
      [&](const auto& c) -> std::string {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, SendMessage>) {
          return "send " + DescribeMessage(c.message, now);
        } else if constexpr (std::is_same_v<T, StartTask>) {
          return std::string(c.prepared ? "start prepared " : "start ") +
                 AttemptName(c.assignment.task, c.assignment.attempt);
        } else if constexpr (std::is_same_v<T, PrepareTask>) {
          return "prepare " + AttemptName(c.assignment.task, c.assignment.attempt);
        } else if constexpr (std::is_same_v<T, DiscardPrepared>) {
          return "discard " + AttemptName(c.task, c.attempt);
        } else if constexpr (std::is_same_v<T, KillTask>) {
          return std::string(c.fenced ? "fence-kill " : "kill ") + AttemptName(c.task, c.attempt) +
                 (c.signal != core::kDefaultVacateSignal ? " signal " + std::to_string(c.signal)
                                                         : std::string()) +
                 " grace " + std::to_string(c.grace.count() / 1000) + "ms";
        } else if constexpr (std::is_same_v<T, ArmTimer>) {
          return "arm " + TimerName(c.timer) + " " + Offset(c.at - now);
        } else if constexpr (std::is_same_v<T, CancelTimer>) {
          return "cancel " + TimerName(c.timer);
        } else if constexpr (std::is_same_v<T, SetReaperDeadline>) {
          return "reaper deadline " + Offset(c.after);
        } else if constexpr (std::is_same_v<T, LogLine>) {
          static constexpr const char* kLevels[] = {"debug", "info", "warn", "error"};
          return std::string("log ") + kLevels[static_cast<int>(c.level)] + ": " + c.text;
        } else if constexpr (std::is_same_v<T, Leave>) {
          return "leave: " + c.reason;
        } else if constexpr (std::is_same_v<T, SuspendTask>) {
          return "suspend " + AttemptName(c.task, c.attempt);
        } else if constexpr (std::is_same_v<T, ResumeTask>) {
          return "resume " + AttemptName(c.task, c.attempt);
        } else if constexpr (std::is_same_v<T, SendOwner>) {
          return std::string("send owner ") + (c.owner.present ? "present" : "away") +
                 (c.input_at ? " (freeze since input " + Offset(*c.input_at - now) + ")" : "");
        } else {
          return "schedule flush";
        }
      },
      command);
}

Result<WorkerState> WorkerState::Create(WorkerStateConfig config, Time now) {
  ASSIGN_OR_RETURN(FencingPolicy fence,
                   FencingPolicy::Create(config.lease_ttl, config.heartbeat_interval, now));
  return WorkerState(std::move(config), fence, now);
}

WorkerState::WorkerState(WorkerStateConfig config, FencingPolicy fence, Time now)
    : config_(std::move(config)),
      slots_(config_.capacity),
      heartbeat_(config_.heartbeat_interval),
      lease_ttl_(config_.lease_ttl),
      fence_(fence),
      last_contact_(now),
      last_watchdog_tick_(now),
      owner_since_(now),
      quiet_since_(now) {}

uint32_t WorkerState::RunningAttempt(TaskId task) const {
  auto it = running_.find(task);
  return it == running_.end() ? 0 : it->second.attempt;
}

[[gnu::hot]] void WorkerState::Handle(Time now, const WorkerEvent& event, WorkerOutbox& out) {
  // An exit first, outside the visit's table: the handoff (BENCH.md B3)
  // runs through here, and each page of code it touches after the worker
  // slept costs it a microsecond.
  if (const auto* exited = std::get_if<TaskExited>(&event)) return OnExited(now, *exited, out);
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, AgentBegan>) {
          last_contact_ = now;
          ArmFence(out);
          last_watchdog_tick_ = now;
          OnWatchdog(now, out);
        } else if constexpr (std::is_same_v<T, LinkUp>) {
          OnLinkUp(out);
        } else if constexpr (std::is_same_v<T, LinkDown>) {
          OnLinkDown(now, out);
        } else if constexpr (std::is_same_v<T, FromServer>) {
          if (established_) Contact(now, out);
          std::visit(
              [&](const auto& m) {
                using M = std::decay_t<decltype(m)>;
                if constexpr (std::is_same_v<M, proto::HelloAck>) {
                  OnHelloAck(now, m, out);
                } else if constexpr (std::is_same_v<M, proto::Assign>) {
                  for (const proto::Assignment& a : m.tasks) OnAssignment(now, a, out);
                } else if constexpr (std::is_same_v<M, proto::Ack>) {
                  for (const proto::TaskAttempt& a : m.tasks) {
                    unacked_.erase(a);
                    sent_this_session_.erase(a);
                  }
                } else if constexpr (std::is_same_v<M, proto::Cancel>) {
                  OnStopRequest(now, m.task, m.attempt, config_.kill_grace, m.reason, m.vacate,
                                out);
                } else if constexpr (std::is_same_v<M, proto::Kill>) {
                  OnStopRequest(now, m.task, m.attempt, Duration::zero(), m.reason, false, out);
                } else if constexpr (std::is_same_v<M, proto::Withdraw>) {
                  OnWithdraw(now, m.task, m.attempt, m.reason, out);
                }
                // LogRequest, Drain, Error: the shell's.
              },
              e.message);
        } else if constexpr (std::is_same_v<T, TaskStarted>) {
          OnStarted(e, out);
        } else if constexpr (std::is_same_v<T, TaskStartFailed>) {
          OnStartFailed(now, e, out);
        } else if constexpr (std::is_same_v<T, TaskPrepareFailed>) {
          OnPrepareFailed(now, e, out);
        } else if constexpr (std::is_same_v<T, TaskExited>) {
          OnExited(now, e, out);
        } else if constexpr (std::is_same_v<T, TaskReported>) {
          OnReported(now, e, out);
        } else if constexpr (std::is_same_v<T, HeartbeatDue>) {
          OnHeartbeat(now, e, out);
        } else if constexpr (std::is_same_v<T, FenceDue>) {
          fence_armed_ = false;
          OnFence(now, out);
        } else if constexpr (std::is_same_v<T, WatchdogDue>) {
          OnWatchdog(now, out);
        } else if constexpr (std::is_same_v<T, FlushDue>) {
          Flush(out);
        } else if constexpr (std::is_same_v<T, OwnerSample>) {
          if (config_.desktop.enabled) OnOwnerSample(now, e, out);
        } else if constexpr (std::is_same_v<T, InputsFetching>) {
          fetching_[e.task] = e.attempt;
        } else if constexpr (std::is_same_v<T, InputsFetched>) {
          const proto::Assignment& a = e.assignment;
          auto f = fetching_.find(a.task);
          if (f == fetching_.end() || f->second != a.attempt) {
            Log(out, LogLevel::kInfo,
                AttemptName(a.task, a.attempt) + " was stopped while its inputs were fetched");
            return;
          }
          fetching_.erase(f);
          if (!e.error.empty()) {
            out.push_back(SendMessage{proto::Refused{a.task, a.attempt, e.error}});
            return;
          }
          OnAssignment(now, a, out);
        }
      },
      event);
}

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
  out.push_back(ArmTimer{WorkerTimer::kHeartbeat, now + heartbeat_});
}

void WorkerState::OnHeartbeat(Time now, const HeartbeatDue& due, WorkerOutbox& out) {
  if (!established_) return;
  proto::Heartbeat heartbeat;
  if (due.utilization) heartbeat.utilization = *due.utilization;
  heartbeat.running = RunningAttempts();
  out.push_back(SendMessage{std::move(heartbeat)});
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

// ---- tasks -------------------------------------------------------------------

void WorkerState::OnAssignment(Time now, const proto::Assignment& a, WorkerOutbox& out) {
  const proto::TaskAttempt key{a.task, a.attempt};
  if (auto it = running_.find(a.task); it != running_.end()) {
    if (it->second.attempt == a.attempt) {
      // Sent again after a re-attach: it runs; say so again.
      started_out_.push_back(proto::StartedTask{a.task, a.attempt, it->second.started_at});
      PostFlush(out);
    } else {
      out.push_back(SendMessage{proto::Refused{
          a.task, a.attempt,
          "attempt " + std::to_string(it->second.attempt) + " of this task is still running here"}});
    }
    return;
  }
  if (auto q = FindQueued(a.task); q != queued_.end()) {
    // The same attempt sent again after a re-attach stays queued as it is.
    if (q->second.attempt != a.attempt) {
      out.push_back(SendMessage{proto::Refused{
          a.task, a.attempt,
          "attempt " + std::to_string(q->second.attempt) + " of this task is queued here"}});
    }
    return;
  }
  if (unacked_.count(key) > 0) return;  // ended already; its Finished is on the way
  if (config_.desktop.enabled && owner_present_) {
    // Sent before the server learnt that the owner came back.
    out.push_back(
        SendMessage{proto::Refused{a.task, a.attempt, "its owner is at " + config_.name}});
    return;
  }
  if (memory_low_) {
    out.push_back(SendMessage{proto::Refused{
        a.task, a.attempt,
        "memory is low on " + config_.name + " (below " +
            FormatBytes(config_.min_available_bytes) + " available)"}});
    return;
  }
  if (a.after) {
    auto predecessor = running_.find(a.after->task);
    if (predecessor != running_.end() && predecessor->second.attempt == a.after->attempt &&
        predecessor->second.fence_reason.empty()) {
      return Enqueue(a, out);
    }
    // The predecessor already ended here (or never ran here): the room it
    // held is free, or Slots refuses below.
  }
  StartNow(now, a, /*prepared=*/false, out);
}

void WorkerState::Enqueue(const proto::Assignment& a, WorkerOutbox& out) {
  const proto::TaskAttempt& predecessor = *a.after;
  if (auto q = queued_.find(predecessor.task); q != queued_.end()) {
    const std::string reason = "a task is already queued behind " +
                               AttemptName(predecessor.task, predecessor.attempt) + " (" +
                               q->second.task.ToString() + ")";
    Log(out, LogLevel::kWarn, "refused " + AttemptName(a.task, a.attempt) + ": " + reason);
    out.push_back(SendMessage{proto::Refused{a.task, a.attempt, reason}});
    return;
  }
  // Kept now; a failed preparation (TaskPrepareFailed, answered at once)
  // takes it out again.
  Log(out, LogLevel::kDebug,
      AttemptName(a.task, a.attempt) + " queued behind " +
          AttemptName(predecessor.task, predecessor.attempt));
  queued_[predecessor.task] = a;
  out.push_back(PrepareTask{a});
}

[[gnu::hot]] void WorkerState::StartNow(Time /*now*/, proto::Assignment a, bool prepared,
                                        WorkerOutbox& out) {
  Status admitted = slots_.Admit(a.task, ToSlotRequest(a));
  if (!admitted.ok()) {
    Log(out, LogLevel::kWarn,
        "refused " + AttemptName(a.task, a.attempt) + ": " + admitted.message());
    if (prepared) out.push_back(DiscardPrepared{a.task, a.attempt});
    out.push_back(SendMessage{proto::Refused{a.task, a.attempt, admitted.message()}});
    return;
  }
  // Running from now on: the next assignment of the same Assign may be
  // queued behind it. TaskStarted completes the entry; TaskStartFailed
  // takes it out.
  auto it = running_.find(a.task);
  if (it == running_.end() && !spare_running_.empty()) {
    spare_running_.key() = a.task;
    it = running_.insert(std::move(spare_running_)).position;
  } else if (it == running_.end()) {
    it = running_.emplace(a.task, Running{}).first;
  }
  Running& run = it->second;
  run.attempt = a.attempt;
  run.fence_reason.clear();
  run.cores.assign(a.cores.begin(), a.cores.end());
  run.gpus.assign(a.gpus.begin(), a.gpus.end());
  run.started_at = Time{};
  run.watchdog_fences = 0;
  run.vacate_signal = a.vacate_signal;
  run.vacate_grace = a.vacate_grace;
  run.suspended = false;
  run.memory_suspended = false;
  run.vacate_reason.clear();
  out.emplace_back(std::in_place_type<StartTask>, std::move(a), prepared);
}

void WorkerState::OnStarted(const TaskStarted& started, WorkerOutbox& out) {
  Running& run = running_[started.task];
  run.attempt = started.attempt;
  run.started_at = started.spawned;
  run.watchdog_fences = started.watchdog_fences;
  started_out_.push_back(proto::StartedTask{started.task, started.attempt, started.spawned});
  PostFlush(out);
}

void WorkerState::OnStartFailed(Time now, const TaskStartFailed& failed, WorkerOutbox& out) {
  if (auto it = running_.find(failed.task);
      it != running_.end() && it->second.attempt == failed.attempt) {
    running_.erase(it);
  }
  (void)slots_.Release(failed.task);
  Log(out, LogLevel::kWarn,
      AttemptName(failed.task, failed.attempt) + " could not start: " + failed.reason);
  RecordFinished(proto::FinishedTask{failed.task, failed.attempt, FailureOutcome(failed.reason),
                                     now},
                 out);
}

void WorkerState::OnPrepareFailed(Time now, const TaskPrepareFailed& failed, WorkerOutbox& out) {
  auto q = FindQueued(failed.task);
  if (q == queued_.end() || q->second.attempt != failed.attempt) return;
  queued_.erase(q);
  Log(out, LogLevel::kWarn,
      AttemptName(failed.task, failed.attempt) + " could not be prepared: " + failed.reason);
  RecordFinished(proto::FinishedTask{failed.task, failed.attempt, FailureOutcome(failed.reason),
                                     now},
                 out);
}

std::map<TaskId, proto::Assignment>::iterator WorkerState::FindQueued(TaskId successor) {
  // At most one successor per running task: a short scan.
  return std::find_if(queued_.begin(), queued_.end(),
                      [&](const auto& entry) { return entry.second.task == successor; });
}

void WorkerState::DropQueued(Time now, const proto::Assignment& a, std::string reason,
                             WorkerOutbox& out) {
  out.push_back(DiscardPrepared{a.task, a.attempt});
  RecordFinished(proto::FinishedTask{a.task, a.attempt, FailureOutcome(std::move(reason)), now,
                                     /*never_started=*/true},
                 out);
}

bool WorkerState::DropFetching(Time now, TaskId task, uint32_t attempt, const std::string& why,
                               WorkerOutbox& out) {
  auto f = fetching_.find(task);
  if (f == fetching_.end() || f->second != attempt) return false;
  fetching_.erase(f);
  Log(out, LogLevel::kInfo, "dropping " + AttemptName(task, attempt) + " (fetching its inputs): " +
                                why);
  RecordFinished(proto::FinishedTask{task, attempt, FailureOutcome(why), now,
                                     /*never_started=*/true},
                 out);
  return true;
}

void WorkerState::OnWithdraw(Time now, TaskId task, uint32_t attempt, const std::string& reason,
                             WorkerOutbox& out) {
  if (DropFetching(now, task, attempt, "withdrawn before it started: " + reason, out)) return;
  auto q = FindQueued(task);
  if (q == queued_.end() || q->second.attempt != attempt) {
    // Started already (its Started report says so), or ended: it stays.
    Log(out, LogLevel::kDebug, AttemptName(task, attempt) + " not queued here; withdrawal ignored");
    return;
  }
  Log(out, LogLevel::kInfo, "withdrawing queued " + AttemptName(task, attempt) + ": " + reason);
  const proto::Assignment dropped = std::move(q->second);
  queued_.erase(q);
  DropQueued(now, dropped, "withdrawn before it started: " + reason, out);
}

void WorkerState::OnStopRequest(Time now, TaskId task, uint32_t attempt, Duration grace,
                                const std::string& reason, bool vacate, WorkerOutbox& out) {
  if (DropFetching(now, task, attempt, "canceled before it started: " + reason, out)) return;
  if (auto q = FindQueued(task); q != queued_.end() && q->second.attempt == attempt) {
    Log(out, LogLevel::kInfo, "dropping queued " + AttemptName(task, attempt) + ": " + reason);
    const proto::Assignment dropped = std::move(q->second);
    queued_.erase(q);
    DropQueued(now, dropped, "canceled before it started: " + reason, out);
    return;
  }
  auto it = running_.find(task);
  if (it == running_.end() || it->second.attempt != attempt) return;  // ended or never ran here
  if (vacate) {
    // Preempted by the server: the way the task asked to be vacated, and
    // its report says so, so that a server restarted meanwhile does not
    // count it as a failure.
    return VacateOne(task, it->second, reason, out);
  }
  Log(out, LogLevel::kInfo, "stopping " + AttemptName(task, attempt) + ": " + reason);
  out.push_back(KillTask{task, attempt, grace, /*fenced=*/false});
}

[[gnu::hot]] void WorkerState::OnExited(Time now, const TaskExited& exited, WorkerOutbox& out) {
  // `now` is the exit as this worker saw it: the handoff (BENCH.md B3) runs
  // from here to the successor's spawn.
  std::string fence_reason;
  std::string vacate_reason;
  if (auto it = running_.find(exited.task); it != running_.end()) {
    fence_reason = std::move(it->second.fence_reason);
    vacate_reason = std::move(it->second.vacate_reason);
    if (fence_reason.empty() && exited.watchdog_fences != it->second.watchdog_fences) {
      // Killed by the reaper's watchdog while this worker did not run.
      fence_reason =
          "fenced: the worker was stopped or stalled past its fencing deadline, so its reaper "
          "killed the task before its lease could expire";
    }
    spare_running_ = running_.extract(it);
  }
  (void)slots_.Release(exited.task);
  // Queue-ahead: the successor starts on the room just freed, before
  // anything slow (the report, log transfers) happens.
  if (auto q = queued_.find(exited.task); q != queued_.end()) {
    proto::Assignment next = std::move(q->second);
    queued_.erase(q);
    if (fence_reason.empty() && next.after->attempt == exited.attempt) {
      StartNow(now, std::move(next), /*prepared=*/true, out);
    } else {
      // Fencing drops the queue before it kills (OnFence); this is only a
      // guard.
      DropQueued(now, next,
                 fence_reason.empty() ? "canceled before it started: attempt " +
                                            std::to_string(exited.attempt) + " of " +
                                            exited.task.ToString() + " ended instead"
                                      : fence_reason,
                 out);
    }
  }
  exited_.push_back(Exited{proto::TaskAttempt{exited.task, exited.attempt}, now,
                           std::move(fence_reason), std::move(vacate_reason)});
}

void WorkerState::OnReported(Time now, const TaskReported& reported, WorkerOutbox& out) {
  const proto::TaskAttempt key{reported.task, reported.attempt};
  // A report without its exit (a shell's slip) is taken as of now.
  Exited exited{key, now, "", ""};
  if (auto it = std::find_if(exited_.begin(), exited_.end(),
                             [&](const Exited& e) { return e.attempt == key; });
      it != exited_.end()) {
    exited = std::move(*it);
    exited_.erase(it);
  }
  core::TaskOutcome outcome = reported.outcome;
  const bool vacated = exited.fence_reason.empty() && !exited.vacate_reason.empty();
  if (!exited.fence_reason.empty()) outcome.reason = std::move(exited.fence_reason);
  if (vacated) outcome.reason = std::move(exited.vacate_reason);
  RecordFinished(proto::FinishedTask{reported.task, reported.attempt, std::move(outcome), exited.at,
                                     /*never_started=*/false, vacated},
                 out);
}

void WorkerState::RecordFinished(proto::FinishedTask finished, WorkerOutbox& out) {
  const proto::TaskAttempt key{finished.task, finished.attempt};
  unacked_[key] = finished;
  if (established_ && sent_this_session_.insert(key).second) {
    finished_out_.push_back(std::move(finished));
    PostFlush(out);
  }
}

void WorkerState::PostFlush(WorkerOutbox& out) {
  if (flush_posted_) return;
  flush_posted_ = true;
  out.push_back(ScheduleFlush{});
}

void WorkerState::Flush(WorkerOutbox& out) {
  flush_posted_ = false;
  std::vector<proto::StartedTask> started = std::exchange(started_out_, {});
  std::vector<proto::FinishedTask> finished = std::exchange(finished_out_, {});
  // Finished before Started: the server books a queue-ahead successor on
  // its predecessor's freed room only once it knows that one ended, and
  // HandoffStats pairs each start with an exit that arrived before it. An
  // attempt that started and ended within this batch is still reported
  // started first: its Finished goes last.
  auto started_here = [&](const proto::FinishedTask& f) {
    return std::any_of(started.begin(), started.end(), [&](const proto::StartedTask& s) {
      return s.task == f.task && s.attempt == f.attempt;
    });
  };
  auto later = std::stable_partition(finished.begin(), finished.end(),
                                     [&](const proto::FinishedTask& f) { return !started_here(f); });
  std::vector<proto::FinishedTask> after_start(std::make_move_iterator(later),
                                               std::make_move_iterator(finished.end()));
  finished.erase(later, finished.end());
  // If the connection dropped meanwhile, finished ones stay in unacked_ and
  // go out in the next Hello.
  if (!finished.empty()) out.push_back(SendMessage{proto::Finished{std::move(finished)}});
  if (!started.empty()) out.push_back(SendMessage{proto::Started{std::move(started)}});
  if (!after_start.empty()) out.push_back(SendMessage{proto::Finished{std::move(after_start)}});
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
  const std::string reason = FenceReason(now - last_contact_);
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
