// BuildAssignment: turns the core's AssignTask command into the worker
// channel's proto::Assignment, with everything the worker needs to run it.
//
// - argv: the group's command with "{index}" expanded (core::ExpandCommand);
// - env, timeout, cores, GPUs, memory limit: from the command and the spec;
// - inputs: the result strings ($DROVER_RESULT, up to 64 KiB each) of the
//   tasks of every group this task's group depends_on, keyed by task id
//   ("12.3"), as the core put them in the command (AssignTask::inputs).
//   Tasks that left no result are omitted. The worker writes each
//   as $DROVER_INPUTS/<task id>. (The message has no field for readable
//   aliases such as "<group>.<index>"; that needs a proto change.)
// - files: each output of those tasks, with the worker that holds it (where
//   its file service listens, and the certificate to pin) and a grant that
//   lets this worker fetch it (docs/design.md, "Data plane"). Without
//   FileGrants, or for a holder that serves no files, `sources` is empty
//   and the worker fails the attempt with a reason naming the file. Only
//   the files the task's `inputs` select are there (the core chose them).
// - max_output: the task's own `max_output`, else `default_max_output`
//   (the server's --max-output; 0 = none).
//
// The command carries everything: nothing here asks the core again.
//
// Thread safety: pure function of its arguments (and of what FileGrants'
// functions return).
#ifndef DROVER_SERVER_ASSIGNMENT_H_
#define DROVER_SERVER_ASSIGNMENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/commands.h"
#include "proto/messages.h"

namespace drover::server {

// What the server knows to let workers fetch files from each other.
struct FileGrants {
  // Where `worker` serves files; nullopt when it serves none (or is unknown).
  std::function<std::optional<proto::FileSource>(WorkerId worker)> source_of;
  // A grant that lets `requester` fetch the file `sha256`.
  std::function<std::string(const std::string& sha256, WorkerId requester)> grant;
};

// The file services of `holders` that serve files now, in their order.
std::vector<proto::FileSource> SourcesOf(const FileGrants& files,
                                         const std::vector<WorkerId>& holders);

proto::Assignment BuildAssignment(const core::AssignTask& assign, const FileGrants* files = nullptr,
                                  uint64_t default_max_output = 0);

}  // namespace drover::server

#endif  // DROVER_SERVER_ASSIGNMENT_H_
