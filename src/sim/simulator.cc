#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/replay.h"

namespace drover::sim {

WaitStats ComputeWaitStats(const std::vector<Duration>& waits) {
  WaitStats s;
  if (waits.empty()) return s;
  std::vector<int64_t> sorted;
  sorted.reserve(waits.size());
  double sum = 0;
  for (Duration d : waits) {
    sorted.push_back(d.count());
    sum += static_cast<double>(d.count());
  }
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&](double p) {
    size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    k = std::clamp<size_t>(k, 1, sorted.size());
    return static_cast<double>(sorted[k - 1]) / 1e6;
  };
  s.mean_s = sum / static_cast<double>(sorted.size()) / 1e6;
  s.p50_s = rank(0.50);
  s.p95_s = rank(0.95);
  s.max_s = static_cast<double>(sorted.back()) / 1e6;
  return s;
}

Result<SimResult> Simulate(const Trace& trace, const Cluster& cluster, const SimOptions& options) {
  if (trace.tasks.empty()) return InvalidArgument("the trace has no tasks");
  internal::Replay replay(trace, cluster, options);
  return replay.Run();
}

}  // namespace drover::sim
