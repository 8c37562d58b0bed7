#include "core/commands.h"

#include <span>
#include <type_traits>

#include "common/quantity.h"

namespace drover::core {

std::string LeaseKey::ToString() const {
  std::string s = "lease:" + std::to_string(worker);
  switch (kind) {
    case LeaseKind::kSlot: return s + ":slot:" + task.ToString();
    case LeaseKind::kGpu: return s + ":gpu:" + std::to_string(gpu);
    case LeaseKind::kGpuShare:
      return s + ":gpu:" + std::to_string(gpu) + ":share:" + task.ToString();
  }
  return s;
}

namespace {

std::string Keys(std::span<const LeaseKey> keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? " " : "") + keys[i].ToString();
  return s + "]";
}

std::string Attempt(const TaskId& task, uint32_t attempt) {
  return task.ToString() + "#" + std::to_string(attempt);
}

std::string Describe(const ClaimLeases& c) {
  return "claim " + Attempt(c.task, c.attempt) + " on w" + std::to_string(c.worker) + " " +
         Keys(c.keys);
}

std::string Describe(const AssignTask& a) {
  std::string s = "assign " + Attempt(a.task, a.attempt) + " on w" + std::to_string(a.worker) +
                  " cores=[";
  for (size_t i = 0; i < a.cores.size(); ++i) s += (i ? "," : "") + std::to_string(a.cores[i]);
  s += "]";
  if (!a.gpus.empty()) {
    s += " gpus=[";
    for (size_t i = 0; i < a.gpus.size(); ++i) {
      s += (i ? "," : "") + std::to_string(a.gpus[i].index) + ":" +
           std::to_string(a.gpus[i].share);
      if (a.gpus[i].mem_bytes != 0) s += "/" + FormatBytes(a.gpus[i].mem_bytes);
    }
    s += "]";
  }
  if (a.mem_limit_bytes != 0) s += " mem=" + FormatBytes(a.mem_limit_bytes);
  if (a.after_attempt != 0) s += " after " + Attempt(a.after, a.after_attempt);
  if (a.checkpoint) {
    s += " checkpoint of #" + std::to_string(a.checkpoint->attempt) + " (" +
         std::to_string(a.checkpoint->files.size()) + " files)";
  }
  return s;
}

std::string Describe(const KillTask& k) {
  return (k.only_queued ? "withdraw "
          : k.vacate    ? "vacate "
                        : "kill ") +
         Attempt(k.task, k.attempt) + " on w" + std::to_string(k.worker) + ": " + k.reason.text;
}

std::string Describe(const RenewLeases& r) {
  return "renew w" + std::to_string(r.worker) + " " + Keys(r.keys);
}

std::string Describe(const ReleaseLeases& r) {
  return "release " + Attempt(r.task, r.attempt) + " on w" + std::to_string(r.worker) + " " +
         Keys(r.keys);
}

std::string Describe(const Persist& p) {
  return std::visit(
      [](const auto& r) -> std::string {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, JobRecord>) {
          return "persist job " + std::to_string(r.job);
        } else if constexpr (std::is_same_v<T, TaskRecord>) {
          std::string s = "persist task " + r.task.ToString() + " " +
                          std::string(TaskStateName(r.state)) + " #" + std::to_string(r.attempt);
          if (r.state == TaskState::kAssigned || r.state == TaskState::kRunning) {
            s += " w" + std::to_string(r.worker);
          }
          if (!r.reason.empty()) s += ": " + r.reason;
          return s;
        } else if constexpr (std::is_same_v<T, CheckpointRecord>) {
          return "persist checkpoint " + Attempt(r.task, r.checkpoint.attempt) + " (" +
                 std::to_string(r.checkpoint.files.size()) + " files)";
        } else {
          return "persist outcome " + Attempt(r.task, r.attempt);
        }
      },
      p.record);
}

std::string Describe(const TaskStateChanged& c) {
  std::string s = "state " + c.task.ToString() + " " + std::string(TaskStateName(c.from)) +
                  "->" + std::string(TaskStateName(c.to)) + " #" + std::to_string(c.attempt);
  if (!c.reason.empty()) s += ": " + c.reason;
  return s;
}

std::string Describe(const ReplicateOutputs& c) {
  std::string s =
      "replicate " + Attempt(c.task, c.attempt) + " to w" + std::to_string(c.to) + " from";
  for (WorkerId w : c.from) s += " w" + std::to_string(w);
  return s + " (" + std::to_string(c.files.size()) + " files)";
}

}  // namespace

std::string DescribeCommand(const Command& command) {
  return std::visit([](const auto& c) { return Describe(c); }, command);
}

}  // namespace drover::core
