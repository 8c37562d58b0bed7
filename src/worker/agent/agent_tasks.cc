// Agent::Impl (agent_impl.h): carrying out the state machine's commands
// (Run, Execute, the timers, idle-desktop mode's owner samples) and the
// tasks they start: directories and $DROVER_INPUTS, queued (prepared)
// starts, kills, exits and their reports. The handoff's path (BENCH.md B3)
// runs through here, in this one file.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/reasons.h"
#include "worker/agent/agent_impl.h"
#include "worker/exec/host_features.h"
#include "worker/resources/resources_host.h"
#include "worker/state/agent_convert.h"

namespace drover::worker {
namespace {

// How many finished tasks' log locations are remembered for `drover logs`.
constexpr size_t kMaxKnownLogs = 4096;

// Writes `text` to `path` (created or truncated, mode 0644).
Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      return Unavailable("cannot write " + path + ": " + error);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

// ---- the state machine's commands ------------------------------------------

[[gnu::hot]] void Agent::Impl::Run(const WorkerEvent& event) {
  if (stopped_ || !state_) return;
  WorkerOutbox out;
  if (!spare_outboxes_.empty()) {
    out = std::move(spare_outboxes_.back());
    spare_outboxes_.pop_back();
  }
  state_->Handle(clock_.Now(), event, out);
  for (const WorkerCommand& command : out) {
    if (stopped_) return;  // a callback (on_attached) may have stopped the agent
    Execute(command);
  }
  out.clear();
  spare_outboxes_.push_back(std::move(out));
}

[[gnu::hot]] void Agent::Impl::Execute(const WorkerCommand& command) {
  // A start first, outside the visit's table (WorkerState::Handle says why).
  if (const auto* start = std::get_if<worker::StartTask>(&command)) {
    return StartTask(start->assignment, start->prepared);
  }
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, SendMessage>) {
          Send(c.message);
        } else if constexpr (std::is_same_v<T, worker::StartTask>) {
          StartTask(c.assignment, c.prepared);
        } else if constexpr (std::is_same_v<T, PrepareTask>) {
          PrepareQueued(c.assignment);
        } else if constexpr (std::is_same_v<T, DiscardPrepared>) {
          prepared_.erase(proto::TaskAttempt{c.task, c.attempt});
          runner_->DiscardPrepared(c.task, c.attempt);
        } else if constexpr (std::is_same_v<T, worker::KillTask>) {
          KillTask(c);
        } else if constexpr (std::is_same_v<T, worker::ArmTimer>) {
          ArmTimer(c.timer, c.at);
        } else if constexpr (std::is_same_v<T, CancelTimer>) {
          TimerOf(c.timer).Cancel();
        } else if constexpr (std::is_same_v<T, SetReaperDeadline>) {
          Status told = reaper_->SetDeadline(c.after);
          if (!told.ok() && !reaper_gone_) {
            reaper_gone_ = true;  // said once: it does not come back
            spdlog::warn("worker {}: {}", name_, told.ToString());
          }
        } else if constexpr (std::is_same_v<T, LogLine>) {
          static constexpr spdlog::level::level_enum kLevels[] = {
              spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
              spdlog::level::err};
          spdlog::log(kLevels[static_cast<int>(c.level)], "worker {}: {}", name_, c.text);
        } else if constexpr (std::is_same_v<T, Leave>) {
          spdlog::info("worker {}: leaving: {}", name_, c.reason);
          if (config_.on_leave) config_.on_leave(c.reason);
        } else if constexpr (std::is_same_v<T, SuspendTask>) {
          Result<SuspendHow> how = runner_->Suspend(c.task);
          if (!how.ok()) {
            spdlog::warn("worker {}: cannot suspend {}: {}", name_, c.task.ToString(),
                         how.status().ToString());
          }
        } else if constexpr (std::is_same_v<T, ResumeTask>) {
          if (Status resumed = runner_->Resume(c.task); !resumed.ok()) {
            spdlog::warn("worker {}: cannot resume {}: {}", name_, c.task.ToString(),
                         resumed.ToString());
          }
        } else if constexpr (std::is_same_v<T, worker::SendOwner>) {
          SendOwner(c);
        } else if constexpr (std::is_same_v<T, ScheduleFlush>) {
          std::weak_ptr<bool> alive = alive_;
          loop_.Post([this, alive] {
            if (alive.expired() || !*alive.lock()) return;
            Run(FlushDue{});
          });
        }
      },
      command);
}

net::Timer& Agent::Impl::TimerOf(WorkerTimer timer) {
  switch (timer) {
    case WorkerTimer::kHeartbeat: return heartbeat_timer_;
    case WorkerTimer::kFence: return fence_timer_;
    case WorkerTimer::kWatchdog: return watchdog_timer_;
  }
  return heartbeat_timer_;
}

void Agent::Impl::ArmTimer(WorkerTimer timer, Time at) {
  // `at` is on the agent's clock (AgentConfig::clock); the loop's timers
  // count real time, so they are armed for the distance from that clock's
  // now.
  const Duration after = at - clock_.Now();
  switch (timer) {
    case WorkerTimer::kHeartbeat:
      heartbeat_timer_.ArmAfter(after, [this] {
        HeartbeatDue due;
        if (sampler_) {
          Result<Utilization> sample = sampler_->SampleUtilization();
          if (sample.ok()) due.utilization = ToCoreUtilization(*sample);
        }
        // The free space of its work directory, for tasks with `disk`.
        if (std::optional<uint64_t> free = FreeDiskBytes(config_.workdir)) {
          if (!due.utilization) due.utilization.emplace();
          due.utilization->disk_free_bytes = free;
        }
        if (config_.min_available_bytes > 0) {
          Result<HostMemory> memory = ReadHostMemory("/proc");
          if (memory.ok()) due.available_bytes = memory->available_bytes;
        }
        Run(due);
      });
      return;
    case WorkerTimer::kFence:
      fence_timer_.ArmAfter(after, [this] { Run(FenceDue{}); });
      return;
    case WorkerTimer::kWatchdog:
      watchdog_timer_.ArmAfter(after, [this] { Run(WatchdogDue{}); });
      return;
  }
}

// ---- tasks ---------------------------------------------------------------

[[gnu::hot]] TaskSpec Agent::Impl::SpecOf(const proto::Assignment& a) const {
  TaskSpec spec = ToTaskSpec(a);
  spec.output_cap_bytes = config_.log_cap_bytes;
  if (config_.max_task_disk_bytes > 0 &&
      (spec.disk_bytes == 0 || spec.disk_bytes > config_.max_task_disk_bytes)) {
    spec.disk_bytes = config_.max_task_disk_bytes;
  }
  return spec;
}

Result<TaskDirs> Agent::Impl::Prepare(const proto::Assignment& a, bool queued) {
  const bool with_inputs = !a.inputs.empty() || !a.files.empty();
  ASSIGN_OR_RETURN(TaskDirs dirs,
                   queued ? runner_->PrepareStart(SpecOf(a), with_inputs)
                          : runner_->PrepareDirs(a.task, a.attempt, with_inputs, a.user));
  // A dependency's result is $DROVER_INPUTS/<id>; one that also left files
  // has them in $DROVER_INPUTS/<id>/ and its result in <id>.result.
  std::set<TaskId> with_files;
  for (const proto::InputFile& f : a.files) with_files.insert(f.from);
  for (const auto& [from, text] : a.inputs) {
    const std::string name = from.ToString() + (with_files.count(from) ? ".result" : "");
    RETURN_IF_ERROR(WriteFile(dirs.inputs + "/" + name, text));
  }
  if (!a.files.empty() || !a.uploads.empty()) {
    if (!files_)
      return FailedPrecondition("this worker does not fetch files (started without them)");
    RETURN_IF_ERROR(files_->LinkInputs(a, dirs.inputs));
    RETURN_IF_ERROR(files_->LinkUploads(a, dirs.task));
  }
  return dirs;
}

void Agent::Impl::PrepareQueued(const proto::Assignment& a) {
  // Everything but the spawn is done now, so that nothing but the spawn
  // stands between the predecessor's exit and this start.
  Result<TaskDirs> dirs = Prepare(a, /*queued=*/true);
  if (!dirs.ok()) {
    return Run(TaskPrepareFailed{a.task, a.attempt, dirs.status().message()});
  }
  prepared_[proto::TaskAttempt{a.task, a.attempt}] = std::move(dirs).value();
}

[[gnu::hot]] void Agent::Impl::StartTask(const proto::Assignment& a, bool prepared) {
  // Made ahead (PrepareTask): nothing but the spawn stands before the start,
  // and what PrepareQueued kept is taken after it. Otherwise the
  // directories and inputs are made now.
  std::optional<TaskDirs> dirs;
  if (!prepared) {
    Result<TaskDirs> made = Prepare(a, /*queued=*/false);
    if (!made.ok()) return Run(TaskStartFailed{a.task, a.attempt, made.status().message()});
    dirs = std::move(made).value();
  }
  StartTimes times;
  Result<pid_t> pid = runner_->Start(
      SpecOf(a), [this](const TaskResult& result) { OnTaskDone(result); }, &times);
  if (prepared) {
    if (auto it = prepared_.find(proto::TaskAttempt{a.task, a.attempt}); it != prepared_.end()) {
      dirs = std::move(it->second);
      prepared_.erase(it);
    }
  }
  if (!pid.ok()) return Run(TaskStartFailed{a.task, a.attempt, pid.status().message()});
  if (known_logs_.size() >= kMaxKnownLogs && known_logs_.count(a.task) == 0) {
    known_logs_.erase(known_logs_.begin());  // the oldest job's first task
  }
  // Without directories (a PrepareTask the state machine never asked for)
  // the task runs, and its logs are not served from here.
  if (dirs) known_logs_[a.task] = KnownLog{a.attempt, *dirs, OutputCapOf(a)};
  spdlog::debug("worker {}: started {}#{} (pid {}): process made at {} us, exec done {} us later",
                name_, a.task.ToString(), a.attempt, *pid, ToMicros(times.spawned),
                (times.exec_done - times.spawned).count());
  Run(TaskStarted{a.task, a.attempt, times.spawned, reaper_->fences()});
}

void Agent::Impl::PollOwner() {
  OwnerSample sample;
  sample.last_input = input_->LastInput();
  const Time now = clock_.Now();
  if (!task_cgroups_.empty() && now >= next_load_at_) {
    next_load_at_ = now + Seconds(1);
    const Duration tasks_cpu = CgroupCpuTime(task_cgroups_);
    Result<double> load = outside_->Sample(std::max(Duration::zero(), tasks_cpu - tasks_cpu_));
    tasks_cpu_ = tasks_cpu;
    if (load.ok()) outside_load_ = *load;
  }
  sample.outside_load = outside_load_;
  Run(sample);
  if (stopped_) return;
  owner_timer_.ArmAfter(config_.owner_poll, [this] { PollOwner(); });
}

void Agent::Impl::SendOwner(const worker::SendOwner& command) {
  proto::Owner owner = command.owner;
  if (command.input_at) {
    // The suspensions before this command are done: every task is frozen.
    owner.freeze_us = std::max<int64_t>(1, (clock_.Now() - *command.input_at).count());
    spdlog::info("worker {}: tasks frozen {:.1f} ms after the owner's input", name_,
                 static_cast<double>(owner.freeze_us) / 1000);
  }
  Send(owner);
}

void Agent::Impl::KillTask(const worker::KillTask& kill) {
  Status killed = runner_->Kill(kill.task, kill.grace, kill.signal);
  if (!killed.ok()) {
    spdlog::warn("worker {}: cannot {} {}: {}", name_, kill.fenced ? "kill" : "stop",
                 kill.task.ToString(), killed.ToString());
  }
}

[[gnu::hot]] void Agent::Impl::OnTaskDone(const TaskResult& result) {
  // The exit as this worker saw it is the `now` of TaskExited: the handoff
  // (BENCH.md B3) runs from there to the successor's spawn, which comes out
  // of it; what the task left is read and reported after that start.
  Run(TaskExited{result.id, result.attempt, reaper_->fences()});
  if (files_) files_->Release(result.id, result.attempt);
  core::TaskOutcome outcome = ToOutcome(result);
  auto known = known_logs_.find(result.id);
  if (files_ && result.outcome == TaskOutcome::kSucceeded && outcome.reason.empty() &&
      known != known_logs_.end() && known->second.attempt == result.attempt &&
      HasEntries(known->second.dirs.output)) {
    // Its outputs are hashed and taken into the cache off the loop; the
    // result goes out once they are listed.
    std::weak_ptr<bool> alive = alive_;
    files_->CollectOutputs(
        known->second.dirs.output, result.id.job, known->second.max_output,
        [this, alive, result, outcome](Result<std::vector<core::OutputFile>> outputs) mutable {
          if (alive.expired() || !*alive.lock()) return;
          if (outputs.ok()) {
            outcome.outputs = std::move(outputs).value();
          } else {
            outcome.reason = core::why::OutputsRefusedText(outputs.status().message());
            spdlog::warn("worker {}: {} {}", name_, result.id.ToString(), outcome.reason);
          }
          ReportAfterCheckpoint(result, std::move(outcome));
        });
    return;
  }
  ReportAfterCheckpoint(result, std::move(outcome));
}

void Agent::Impl::ReportDone(const TaskResult& result, core::TaskOutcome outcome) {
  const bool succeeded = result.outcome == TaskOutcome::kSucceeded && outcome.reason.empty();
  Run(TaskReported{result.id, result.attempt, std::move(outcome)});
  // `finished` goes out before the log transfers' eof: the server ends a
  // follower on eof only once it knows the attempt is over, and a posted
  // flush would come after the eof.
  Run(FlushDue{});
  if (logs_) logs_->TaskEnded(result.id, result.attempt);
  // Its outputs are in the cache and no retry needs its checkpoints: what
  // of its directories is empty serves the next tasks.
  auto known = known_logs_.find(result.id);
  if (succeeded && known != known_logs_.end() && known->second.attempt == result.attempt) {
    runner_->Recycle(result.id, known->second.dirs);
  }
}

}  // namespace drover::worker
