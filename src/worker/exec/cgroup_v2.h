// The cgroup v2 isolator: one cgroup per task under a delegated root.
//
// Layout: <root>/w<worker pid>/<task>. The root must be a cgroup the
// worker may write (systemd Delegate=yes, or a container's own tree) whose
// cgroup.controllers lists memory, cpu and pids; the isolator enables them
// in cgroup.subtree_control of the root and of its w<pid> child.
// Per task: memory.max, cpu.max (quota from milli-cpus, period 100 ms),
// pids.max, cpuset.cpus when the cpuset controller is available; accounting
// from cpu.stat (usage_usec), memory.peak (Linux 5.19+) and memory.events
// (oom_kill); cgroup.kill (Linux 5.14+) plus a pidfd SIGKILL of each member.
//
// The root is a parameter so that tests can run this code against a plain
// directory shaped like cgroupfs.
//
// One such isolator per worker process: the w<pid> level is per process.
// Threading: belongs to the executor's thread.
#ifndef DROVER_WORKER_EXEC_CGROUP_V2_H_
#define DROVER_WORKER_EXEC_CGROUP_V2_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/exec/isolator.h"

namespace drover::worker {

// Fails (FailedPrecondition) when `root` is not a directory, lacks one of
// the memory, cpu or pids controllers, or cannot be written.
Result<std::unique_ptr<Isolator>> MakeCgroupV2Isolator(const std::string& root);

// The default delegated root: <mount>/<this process's v2 cgroup>/drover is
// unusable when the worker itself sits in that cgroup (v2 forbids processes
// in inner nodes), so the default is the worker's own cgroup's parent:
// <mount><parent of current>/drover. Fails when /proc/self/cgroup has no v2
// line.
Result<std::string> DefaultCgroupV2Root(const std::string& mount);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_CGROUP_V2_H_
