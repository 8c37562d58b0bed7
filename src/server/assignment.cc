#include "server/assignment.h"

namespace drover::server {

proto::Assignment BuildAssignment(const core::AssignTask& assign) {
  proto::Assignment a;
  a.task = assign.task;
  a.attempt = assign.attempt;
  a.cores = assign.cores;
  a.mem_limit_bytes = assign.mem_limit_bytes;
  a.gpus = assign.gpus;
  a.array_index = assign.array_index;
  if (assign.after_attempt != 0) a.after = proto::TaskAttempt{assign.after, assign.after_attempt};
  if (assign.job != nullptr) {
    const core::TaskGroupSpec& spec = assign.Spec();
    a.cpu_quota_milli = spec.resources.cpus_milli;
    a.timeout = spec.timeout;
    a.argv = core::ExpandCommand(spec.command, assign.array_index);
    a.env = spec.env;
    a.group_name = spec.name;
    a.job_name = assign.job->name;
    a.vacate_signal = spec.vacate_signal;
    a.vacate_grace = spec.vacate_grace;
  }
  if (assign.inputs) {
    for (const auto& [task, result] : *assign.inputs) a.inputs[task] = result;
  }
  return a;
}

}  // namespace drover::server
