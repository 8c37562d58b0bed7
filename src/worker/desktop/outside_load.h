// OutsideLoad: how many cores the processes outside Drover keep busy — the
// owner's compile, video call or game — so that `drover worker --desktop`
// offers no work while the machine is in use even without keyboard or
// mouse input.
//
// The machine's busy time comes from <proc_root>/stat (the "cpu" line, read
// as UtilizationSampler reads it: everything but idle and iowait is busy);
// Drover's own share comes from the caller, who takes differences of
// CgroupCpuTime over its task cgroups between two samples.
//
//   outside cores = (busy jiffies − Drover's CPU time in jiffies) × cpus
//                   ÷ all jiffies
//
// where all jiffies (every cpu's time, USER_HZ a second) over cpus (the
// cpuN lines) is the time between the samples: no clock is read, so a fake
// proc root gives exact figures.
//
// Thread safety: an OutsideLoad belongs to one thread; CgroupCpuTime is a
// free function without state, safe from any thread.
#ifndef DROVER_WORKER_DESKTOP_OUTSIDE_LOAD_H_
#define DROVER_WORKER_DESKTOP_OUTSIDE_LOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

// CPU used by processes outside Drover, in cores, between two samples.
class OutsideLoad {
 public:
  // proc_root: "/proc" (tests pass a directory with a fake stat file).
  // Reads stat once as the baseline; if that fails, the first Sample()
  // covers the time since boot.
  explicit OutsideLoad(std::string proc_root = "/proc");

  // Busy cores of the whole machine since the previous call (first call:
  // since construction) minus `drover_cpu_delta`, the CPU time Drover's
  // tasks used in that interval. Never below 0; 0 when no time passed, or
  // when the counters went back (a cpu went offline), which also starts
  // the next interval there. Errors name the file: NotFound or Unavailable
  // when it cannot be read, DataLoss when it has no readable "cpu" line or
  // no cpuN line; the baseline is kept then.
  Result<double> Sample(Duration drover_cpu_delta);

 private:
  struct CpuJiffies {
    uint64_t busy = 0;
    uint64_t total = 0;
    uint64_t cpus = 0;
  };
  Result<CpuJiffies> ReadStat() const;

  std::string proc_root_;
  int64_t user_hz_;  // the unit of /proc/stat: sysconf(_SC_CLK_TCK), 100 on Linux
  CpuJiffies previous_;
};

// Total CPU time used so far by everything under these cgroup directories:
// cgroup v1 cpuacct (`cpuacct.usage`, nanoseconds) or v2 (`cpu.stat`
// usage_usec), whichever file exists in each; directories with neither, or
// whose file cannot be read as a number, are skipped, and a directory named
// twice (cpu and cpuacct linked to cpu,cpuacct) counts once. Both counters include
// the cgroup's descendants, those removed too, so pass the roots the
// worker's tasks live under (one per v1 hierarchy or the v2 one), not each
// task's cgroup: a task that ended between two samples still counts.
Duration CgroupCpuTime(const std::vector<std::string>& dirs);

}  // namespace drover::worker

#endif  // DROVER_WORKER_DESKTOP_OUTSIDE_LOAD_H_
