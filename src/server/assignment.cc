#include "server/assignment.h"

namespace drover::server {

proto::Assignment BuildAssignment(const core::AssignTask& assign) {
  proto::Assignment a;
  a.task = assign.task;
  a.attempt = assign.attempt;
  a.cores = assign.cores;
  a.cpu_quota_milli = assign.cpu_quota_milli;
  a.mem_limit_bytes = assign.mem_limit_bytes;
  a.gpus = assign.gpus;
  a.timeout = assign.timeout;
  a.array_index = assign.array_index;
  if (assign.after_attempt != 0) a.after = proto::TaskAttempt{assign.after, assign.after_attempt};
  if (assign.spec != nullptr) {
    a.argv = core::ExpandCommand(assign.spec->command, assign.array_index);
    a.env = assign.spec->env;
    a.group_name = assign.spec->name;
  }
  if (assign.job != nullptr) a.job_name = assign.job->name;
  for (const auto& [task, result] : assign.inputs) a.inputs[task] = result;
  return a;
}

}  // namespace drover::server
