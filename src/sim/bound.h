// MakespanBound: how short any schedule of a trace on a cluster could be.
//
// Three lower bounds on the makespan (first submit to last finish), each
// holding for every policy, and their maximum:
//   gpu_area  for every instant t: (t - first submit) + the GPU-seconds of
//             the tasks that cannot start before t / GPUs in the cluster
//             (at t = first submit: all GPU-seconds / GPUs);
//   cpu_area  the same with cpu-seconds and cores;
//   chain     the longest path through the dependencies, where a task can
//             start no earlier than its submit time and its dependencies'
//             earliest finish.
// The plain bound leaves release times out: max(all GPU-seconds /
// GPUs, chain), never above value_s(); drover sim's makespan goal
// (docs/sim.md) is stated against it.
// A ratio of the simulated makespan to this bound near 1 means the policy
// left little on the table; it ignores fragmentation (a 4-GPU task needs
// one worker with 4 free GPUs), so 1.0 is not always reachable.
//
// Thread safety: pure function, plain values.
#ifndef DROVER_SIM_BOUND_H_
#define DROVER_SIM_BOUND_H_

#include <algorithm>

#include "sim/cluster.h"
#include "sim/trace.h"

namespace drover::sim {

struct MakespanBound {
  double gpu_area_s = 0;
  double cpu_area_s = 0;
  double chain_s = 0;
  double plain_gpu_area_s = 0;  // all GPU-seconds / GPUs
  double value_s() const { return std::max({gpu_area_s, cpu_area_s, chain_s}); }
  double plain_s() const { return std::max(plain_gpu_area_s, chain_s); }
};

MakespanBound ComputeBound(const Trace& trace, const Cluster& cluster);

}  // namespace drover::sim

#endif  // DROVER_SIM_BOUND_H_
