#include "server/assignment.h"

namespace drover::server {

std::vector<proto::FileSource> SourcesOf(const FileGrants& files,
                                         const std::vector<WorkerId>& holders) {
  std::vector<proto::FileSource> sources;
  for (WorkerId w : holders) {
    if (std::optional<proto::FileSource> s = files.source_of(w)) sources.push_back(*s);
  }
  return sources;
}

proto::Assignment BuildAssignment(const core::AssignTask& assign, const FileGrants* files,
                                  uint64_t default_max_output) {
  proto::Assignment a;
  a.task = assign.task;
  a.attempt = assign.attempt;
  a.cores = assign.cores;
  a.mem_limit_bytes = assign.mem_limit_bytes;
  a.gpus = assign.gpus;
  a.array_index = assign.array_index;
  a.max_output_bytes = default_max_output;
  if (assign.after_attempt != 0) a.after = proto::TaskAttempt{assign.after, assign.after_attempt};
  if (assign.job != nullptr) {
    const core::TaskGroupSpec& spec = assign.Spec();
    a.cpu_quota_milli = spec.resources.cpus_milli;
    a.timeout = spec.timeout;
    a.argv = core::ExpandCommand(spec.command, assign.array_index);
    a.env = spec.env;
    a.group_name = spec.name;
    a.job_name = assign.job->name;
    a.user = assign.job->user;  // a per-user worker runs the task as its account
    a.vacate_signal = spec.vacate_signal;
    a.vacate_grace = spec.vacate_grace;
    a.uploads = spec.input_files;
    a.private_network = spec.resources.private_network;
    a.io = spec.io;
    a.disk_bytes = spec.resources.disk_bytes;
    a.image = spec.image;
    a.image_pull = spec.image_pull;
    if (spec.max_output_bytes != 0) {
      a.max_output_bytes = spec.max_output_bytes;
      a.max_output_by_task = true;
    }
  }
  if (assign.inputs) {
    for (const core::DependencyInput& in : *assign.inputs) {
      if (!in.result.empty()) a.inputs[in.task] = in.result;
      if (in.outputs.empty()) continue;
      // Every holder that serves files now, the original first.
      std::vector<proto::FileSource> holders;
      if (files != nullptr && in.outputs_on != 0) {
        std::vector<WorkerId> ids{in.outputs_on};
        ids.insert(ids.end(), in.replicas.begin(), in.replicas.end());
        holders = SourcesOf(*files, ids);
      }
      for (const core::OutputFile& file : in.outputs) {
        proto::InputFile& f = a.files.emplace_back();
        f.from = in.task;
        f.file = file;
        f.sources = holders;
        if (files != nullptr) f.grant = files->grant(file.sha256, assign.worker);
      }
    }
  }
  if (assign.checkpoint) {
    a.checkpoint = assign.checkpoint->files;
    a.checkpoint_from = assign.checkpoint->worker;
  }
  return a;
}

}  // namespace drover::server
