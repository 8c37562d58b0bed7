// How `drover up` shares this machine between its local workers: each gets
// a disjoint, contiguous run of the available cores (so two local workers
// never offer the same core) and an equal part of the memory.
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_CORE_SPLIT_H_
#define DROVER_CLI_CORE_SPLIT_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace drover::cli {

// Splits `cores` (sorted, distinct) into `workers` core lists in the
// worker --cpus syntax ("0-3", "4,6-7"), the first lists one core longer
// when they do not divide evenly. kInvalidArgument when workers < 1 or
// there are fewer cores than workers.
Result<std::vector<std::string>> SplitCores(const std::vector<int>& cores, int workers);

// "0-3,5,7-8" for sorted distinct ids.
std::string FormatCoreList(const std::vector<int>& cores);

// The cores this process may run on (sched_getaffinity), sorted.
Result<std::vector<int>> AvailableCores();

}  // namespace drover::cli

#endif  // DROVER_CLI_CORE_SPLIT_H_
