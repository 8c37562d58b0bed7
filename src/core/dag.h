// Dag: the dependency graph between the task groups of one job.
//
// Groups depend on other groups of the same job by name; a group's tasks
// become ready when every task of every group it depends on succeeded
// (counted per group, not per task, so an array of a million members costs
// one counter). BuildGroupGraph checks the names and rejects cycles.
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_CORE_DAG_H_
#define DROVER_CORE_DAG_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace drover::core {

struct GroupGraph {
  // deps[g]: the groups g depends on; dependents[g]: the groups that depend on g.
  std::vector<std::vector<uint32_t>> deps;
  std::vector<std::vector<uint32_t>> dependents;
};

// Errors: duplicate or empty group names, an unknown name in depends_on, a
// group depending on itself, a cycle (named), more than 65535 groups, an
// `inputs` selector that is not valid (CheckInputs, core/input_select.h).
Result<GroupGraph> BuildGroupGraph(const JobSpec& spec);

}  // namespace drover::core

#endif  // DROVER_CORE_DAG_H_
