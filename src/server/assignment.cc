#include "server/assignment.h"

namespace drover::server {

proto::Assignment BuildAssignment(const core::Scheduler& scheduler, const RecordFold& fold,
                                  const core::AssignTask& assign) {
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
  std::shared_ptr<const core::JobSpec> spec = fold.Spec(assign.task.job);
  if (spec == nullptr || assign.spec == nullptr) return a;
  a.job_name = spec->name;
  for (const std::string& dep : assign.spec->depends_on) {
    // Tasks are numbered group after group, members of an array in order.
    uint32_t first = 0;
    for (const core::TaskGroupSpec& g : spec->groups) {
      if (g.name != dep) {
        first += g.TaskCount();
        continue;
      }
      for (uint32_t i = 0; i < g.TaskCount(); ++i) {
        const TaskId id{assign.task.job, first + i};
        Result<core::TaskInfo> info = scheduler.GetTask(id);
        if (info.ok() && info->outcome && !info->outcome->result.empty()) {
          a.inputs[id] = info->outcome->result;
        }
      }
      break;
    }
  }
  return a;
}

}  // namespace drover::server
