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
//
// The command carries everything: nothing here asks the core again.
//
// Thread safety: pure function of its argument.
#ifndef DROVER_SERVER_ASSIGNMENT_H_
#define DROVER_SERVER_ASSIGNMENT_H_

#include "core/commands.h"
#include "proto/messages.h"

namespace drover::server {

proto::Assignment BuildAssignment(const core::AssignTask& assign);

}  // namespace drover::server

#endif  // DROVER_SERVER_ASSIGNMENT_H_
