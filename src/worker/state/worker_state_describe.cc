// WorkerState's transcript: one line per message, command and timer, as its
// tests compare them (DescribeCommand, worker_state.h).
#include <string>
#include <type_traits>

#include "common/quantity.h"
#include "worker/state/worker_state.h"
#include "worker/state/worker_state_text.h"

namespace drover::worker {
namespace {

using internal::AttemptName;

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
          if (!m.unhealthy.empty()) line += " unhealthy: " + m.unhealthy;
          for (const auto& [index, why] : m.sick_gpus) {
            line += " sick GPU " + std::to_string(index) + ": " + why;
          }
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

}  // namespace drover::worker
