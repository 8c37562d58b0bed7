#include "worker/state/worker_state.h"

#include <algorithm>
#include <iterator>
#include <type_traits>
#include <utility>

#include "common/quantity.h"
#include "core/reasons.h"
#include "worker/state/agent_convert.h"
#include "worker/state/worker_state_text.h"

// WorkerState: creation, the queries, and the tasks: assignments, queue-ahead,
// starts, stops and ends (worker_state.h). Its link and fencing are in
// worker_state_link.cc, its transcript in worker_state_describe.cc.
namespace drover::worker {

using internal::AttemptName;
using internal::Log;

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
          if (e.disk_free_bytes) disk_free_ = e.disk_free_bytes;
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
        } else if constexpr (std::is_same_v<T, HealthChecked>) {
          OnHealth(e, out);
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
            out.push_back(SendMessage{proto::Refused{a.task, a.attempt, e.error, e.corrupt}});
            return;
          }
          OnAssignment(now, a, out);
        }
      },
      event);
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
  if (!unhealthy_.empty()) {
    // Sent before the server learnt it.
    out.push_back(SendMessage{
        proto::Refused{a.task, a.attempt, config_.name + " is unhealthy: " + unhealthy_}});
    return;
  }
  for (const core::GpuGrant& gpu : a.gpus) {
    if (auto sick = sick_gpus_.find(gpu.index); sick != sick_gpus_.end()) {
      out.push_back(SendMessage{proto::Refused{
          a.task, a.attempt,
          "GPU " + std::to_string(gpu.index) + " of " + config_.name + " is sick: " + sick->second}});
      return;
    }
  }
  if (memory_low_) {
    out.push_back(SendMessage{proto::Refused{
        a.task, a.attempt,
        "memory is low on " + config_.name + " (below " +
            FormatBytes(config_.min_available_bytes) + " available)"}});
    return;
  }
  if (a.disk_bytes > 0 && disk_free_ && a.disk_bytes > *disk_free_) {
    // The server placed it on free space it heard of earlier.
    out.push_back(SendMessage{proto::Refused{a.task, a.attempt,
                                             "disk: it asks " + FormatBytes(a.disk_bytes) +
                                                 " for its directory, and the work directory "
                                                 "of " +
                                                 config_.name + " has " + FormatBytes(*disk_free_) +
                                                 " free"}});
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
  if (DropFetching(now, task, attempt, core::why::WithdrawnBeforeStartText(reason), out)) return;
  auto q = FindQueued(task);
  if (q == queued_.end() || q->second.attempt != attempt) {
    // Started already (its Started report says so), or ended: it stays.
    Log(out, LogLevel::kDebug, AttemptName(task, attempt) + " not queued here; withdrawal ignored");
    return;
  }
  Log(out, LogLevel::kInfo, "withdrawing queued " + AttemptName(task, attempt) + ": " + reason);
  const proto::Assignment dropped = std::move(q->second);
  queued_.erase(q);
  DropQueued(now, dropped, core::why::WithdrawnBeforeStartText(reason), out);
}

void WorkerState::OnStopRequest(Time now, TaskId task, uint32_t attempt, Duration grace,
                                const std::string& reason, bool vacate, WorkerOutbox& out) {
  if (DropFetching(now, task, attempt, core::why::CanceledBeforeStartText(reason), out)) return;
  if (auto q = FindQueued(task); q != queued_.end() && q->second.attempt == attempt) {
    Log(out, LogLevel::kInfo, "dropping queued " + AttemptName(task, attempt) + ": " + reason);
    const proto::Assignment dropped = std::move(q->second);
    queued_.erase(q);
    DropQueued(now, dropped, core::why::CanceledBeforeStartText(reason), out);
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
      fence_reason = core::why::FencedByWatchdogText();
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
                 fence_reason.empty()
                     ? core::why::PredecessorEndedInsteadText(exited.task, exited.attempt)
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

}  // namespace drover::worker
