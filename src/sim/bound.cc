#include "sim/bound.h"

#include <algorithm>
#include <vector>

namespace drover::sim {

MakespanBound ComputeBound(const Trace& trace, const Cluster& cluster) {
  MakespanBound b;
  if (trace.tasks.empty()) return b;
  const int64_t first = trace.tasks.front().submit.count();
  // Earliest start of each task: its submit, or its dependencies' earliest
  // finish if later. The chain bound is the latest earliest finish.
  std::vector<int64_t> earliest_start(trace.tasks.size());
  int64_t latest = 0;
  for (size_t i = 0; i < trace.tasks.size(); ++i) {
    const TraceTask& t = trace.tasks[i];
    int64_t start = t.submit.count();
    for (uint32_t d = 0; d < t.deps_count; ++d) {
      const uint32_t dep = trace.deps[t.deps_begin + d];
      start = std::max(start, earliest_start[dep] + trace.tasks[dep].duration.count());
    }
    earliest_start[i] = start;
    latest = std::max(latest, start + t.duration.count());
  }
  b.chain_s = static_cast<double>(latest - first) / 1e6;
  // Area bounds with release times: the work that cannot start before t
  // (earliest start >= t) needs at least work / capacity after t, so the
  // makespan is at least (t - first) + that, for every t. At t = first it is
  // the plain area bound (all work / capacity). Sums in seconds x
  // hundredths (or milli-cpus): doubles keep a million tasks exact enough.
  std::vector<uint32_t> order(trace.tasks.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t c) { return earliest_start[a] < earliest_start[c]; });
  const double gpus = static_cast<double>(cluster.TotalGpus()) * core::kWholeGpu;
  const double cores = static_cast<double>(cluster.TotalCores()) * 1000.0;
  double gpu_work = 0;
  double cpu_work = 0;
  for (size_t k = order.size(); k-- > 0;) {
    const TraceTask& t = trace.tasks[order[k]];
    const core::ResourceRequest& req = trace.RequestOf(t);
    const double seconds = static_cast<double>(t.duration.count()) / 1e6;
    gpu_work += static_cast<double>(req.gpus) * seconds;
    cpu_work += static_cast<double>(req.cpus_milli) * seconds;
    const double from = static_cast<double>(earliest_start[order[k]] - first) / 1e6;
    if (gpus > 0) b.gpu_area_s = std::max(b.gpu_area_s, from + gpu_work / gpus);
    if (cores > 0) b.cpu_area_s = std::max(b.cpu_area_s, from + cpu_work / cores);
  }
  if (gpus > 0) b.plain_gpu_area_s = gpu_work / gpus;
  return b;
}

}  // namespace drover::sim
