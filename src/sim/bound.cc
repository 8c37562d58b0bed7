#include "sim/bound.h"

#include <vector>

namespace drover::sim {

MakespanBound ComputeBound(const Trace& trace, const Cluster& cluster) {
  MakespanBound b;
  if (trace.tasks.empty()) return b;
  // Sums in seconds x hundredths (or milli-cpus): doubles keep a week of a
  // million tasks exact enough without overflow.
  double gpu_work = 0;
  double cpu_work = 0;
  std::vector<int64_t> earliest_finish(trace.tasks.size());
  int64_t latest = 0;
  for (size_t i = 0; i < trace.tasks.size(); ++i) {
    const TraceTask& t = trace.tasks[i];
    const core::ResourceRequest& req = trace.RequestOf(t);
    const double seconds = static_cast<double>(t.duration.count()) / 1e6;
    gpu_work += static_cast<double>(req.gpus) * seconds;
    cpu_work += static_cast<double>(req.cpus_milli) * seconds;
    int64_t start = t.submit.count();
    for (uint32_t d = 0; d < t.deps_count; ++d) {
      start = std::max(start, earliest_finish[trace.deps[t.deps_begin + d]]);
    }
    earliest_finish[i] = start + t.duration.count();
    latest = std::max(latest, earliest_finish[i]);
  }
  const uint64_t gpus = cluster.TotalGpus();
  const uint64_t cores = cluster.TotalCores();
  if (gpus > 0) b.gpu_area_s = gpu_work / (static_cast<double>(gpus) * core::kWholeGpu);
  if (cores > 0) b.cpu_area_s = cpu_work / (static_cast<double>(cores) * 1000.0);
  b.chain_s = static_cast<double>(latest - trace.tasks.front().submit.count()) / 1e6;
  return b;
}

}  // namespace drover::sim
