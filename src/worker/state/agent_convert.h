// Conversions between the worker's own types (resources.h, executor.h,
// slots.h) and the protocol's (proto/messages.h, core/resources.h), used by
// the agent shell. Kept apart from the agent so each rule is testable
// without a network or a process.
//
// Thread safety: pure functions.
#ifndef DROVER_WORKER_STATE_AGENT_CONVERT_H_
#define DROVER_WORKER_STATE_AGENT_CONVERT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "core/model.h"
#include "core/resources.h"
#include "proto/messages.h"
#include "worker/exec/executor.h"
#include "worker/exec/slots.h"
#include "worker/resources/resources.h"

namespace drover::worker {

// A server address "host:port" (or "[v6]:port"; a bare "host" means port
// 7210). InvalidArgument names the text when the port is not 1..65535.
struct ServerAddress {
  std::string host;
  uint16_t port = 7210;
};
Result<ServerAddress> ParseServerAddress(std::string_view text);

// What the Hello offers: cores, memory, GPUs (index, UUID, model, memory),
// labels and counters. `name` is the worker's name.
core::WorkerResources ToCoreResources(const WorkerResources& detected, const std::string& name);

// The heartbeat figures; GPU figures a device does not report are sent as 0.
core::WorkerUtilization ToCoreUtilization(const Utilization& sample);

// The local admission request for an assignment: its pinned cores, CPU
// quota, memory limit and GPU shares.
SlotRequest ToSlotRequest(const proto::Assignment& assignment);

// The executor's spec for an assignment: argv, env (the job's extra
// environment), cores, quota, memory, GPUs, array index. The timeout is not
// enforced here: the server cancels a task that overruns.
TaskSpec ToTaskSpec(const proto::Assignment& assignment);

// How an attempt ended, as the protocol reports it: exit code or signal,
// OOM, usage and the $DROVER_RESULT text. A text over core::kMaxResultBytes
// is cut to that size, ending in "[drover: result truncated at 64 KiB]".
core::TaskOutcome ToOutcome(const TaskResult& result);

// An attempt that ended without running normally (the executor could not
// start it, or the worker fenced it): exit code -1 (no exit status) unless
// given, and the worker's reason in `reason`, which the server shows as the
// attempt's reason ("command not found: trian.py").
core::TaskOutcome FailureOutcome(std::string reason, int exit_code = -1, int signal = 0);

}  // namespace drover::worker

#endif  // DROVER_WORKER_STATE_AGENT_CONVERT_H_
