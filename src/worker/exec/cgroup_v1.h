// The cgroup v1 isolator: one cgroup per task in each controller hierarchy.
//
// Layout: for each controller mounted at <mounts>/<controller>, Drover's
// cgroups live under the worker's own cgroup of that controller (which may
// be nested, see /proc/self/cgroup):
//     <mounts>/<controller>/<current>/drover/w<worker pid>/<task>
// Per task: memory (limit, peak, OOM count), cpuacct (CPU time of the
// tree) and freezer (kill without races; Suspend in idle-desktop mode,
// TaskCage::Freeze) always; cpu (CFS quota from
// milli-cpus), cpuset (the assigned cores), pids (max) and devices (deny
// /dev/nvidiaN, major 195, for GPUs not assigned) only when the task's
// spec needs them, and blkio (throttles, weight) for a task with disk I/O
// limits.
//
// Reuse: the cgroups are named t<N>, not after tasks. One whose task ended
// without leaving a process behind goes to a pool (up to 64 per hierarchy)
// and serves a later task: creating and removing a memory cgroup costs far
// more than resetting one. A reused cgroup gets a limit written only when
// the new task wants another value than it has (memory "-1", cpu quota
// "-1", pids "max" when unlimited); CPU time and the OOM count are read as
// differences from where the last task left them; the memory peak is reset
// (memory.max_usage_in_bytes), after memory.force_empty when the last task
// left more than 1 MiB charged (page cache), so a peak may include up to
// 1 MiB of an earlier task's cache. devices and blkio cgroups are never
// reused. A
// cgroup that held leftovers, or whose counters could not be read, is
// removed. The pool is removed with the isolator.
//
// Refit: a cage whose only process is a warm interpreter waiting for its
// next call serves that call as it is (RefitCage): limits written where
// they differ, those the call does not ask for lifted ("-1", "max", every
// core), the peak reset, and the memory the interpreter holds then added
// to the call's limit and taken off its peak.
//
// Several isolators may share a process (`drover up` runs N workers): they
// share its w<pid> level, and cgroup names are unique in the process.
// Threading: belongs to the executor's thread.
#ifndef DROVER_WORKER_EXEC_CGROUP_V1_H_
#define DROVER_WORKER_EXEC_CGROUP_V1_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/exec/isolator.h"

namespace drover::worker {

struct CgroupV1Options {
  std::string mounts = "/sys/fs/cgroup";
  int gpu_count = 0;
};

// Fails (FailedPrecondition) when the memory, cpuacct or freezer hierarchy
// is missing or Drover's directories cannot be created in it.
Result<std::unique_ptr<Isolator>> MakeCgroupV1Isolator(const CgroupV1Options& options);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_CGROUP_V1_H_
