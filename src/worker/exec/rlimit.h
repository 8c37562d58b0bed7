// The rlimit isolator: the fallback where no cgroup is writable.
//
// Per task, set in the child before exec: RLIMIT_DATA for memory (heap and
// private mappings; RLIMIT_AS would also count address space reserved but
// never used, which breaks CUDA and JVMs), RLIMIT_NPROC for max_pids.
// What it cannot do, by the nature of rlimits:
//   - no CPU quota (RLIMIT_CPU kills at a total, it does not throttle) and
//     no cpuset (the executor still pins with sched_setaffinity);
//   - the memory limit is per process, not per tree, and exceeding it makes
//     allocations fail instead of an OOM kill, so OOM is not reported;
//   - RLIMIT_NPROC counts all processes of the user, and root ignores it;
//   - no membership list: a grandchild that left the task's process group
//     survives a kill;
//   - accounting is wait4's rusage: CPU of the task and the descendants it
//     waited for, peak RSS of the largest single process.
//
// Threading: belongs to the executor's thread.
#ifndef DROVER_WORKER_EXEC_RLIMIT_H_
#define DROVER_WORKER_EXEC_RLIMIT_H_

#include <memory>

#include "worker/exec/isolator.h"

namespace drover::worker {

std::unique_ptr<Isolator> MakeRlimitIsolator();

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_RLIMIT_H_
