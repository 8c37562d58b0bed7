// CriticalPath: the chain of dependencies that decided when a job ended.
//
// Given the tasks of one job (their wall times, end times and the tasks
// each depends on), the critical path is the longest path through the
// dependency DAG, weighted by wall time, that ends at the task that ended
// last. Shortening any task on it (and only on it) can make the job end
// sooner, so reports highlight it.
//
// Pure function; no I/O. Thread safety: none needed.
#ifndef DROVER_METRICS_CRITICAL_PATH_H_
#define DROVER_METRICS_CRITICAL_PATH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace drover::metrics {

struct PathNode {
  // When the (last attempt of the) task ended, in any unit shared by all
  // nodes; absent for a task that has not ended (it cannot end the path,
  // but may lie on it with its wall time so far).
  std::optional<int64_t> end;
  // Wall time of the last attempt (0 for a task that never ran).
  int64_t wall = 0;
  // Indices (into the same span) of the tasks this one depends on.
  std::vector<size_t> deps;
};

// The critical path as indices into `nodes`, first task first. Empty when no
// task has ended. The path ends at the node with the greatest `end` (the
// lowest index among equals) and follows, from each node, the dependency
// with the greatest summed wall time (ties: the one that ended later, then
// the lowest index). Dependency indices out of range are ignored, and so is
// a dependency that would close a cycle (the core never builds one).
std::vector<size_t> CriticalPath(std::span<const PathNode> nodes);

// The summed wall time of `path`.
int64_t PathLength(std::span<const PathNode> nodes, std::span<const size_t> path);

}  // namespace drover::metrics

#endif  // DROVER_METRICS_CRITICAL_PATH_H_
