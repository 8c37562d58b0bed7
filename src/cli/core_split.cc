#include "cli/core_split.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

namespace drover::cli {

std::string FormatCoreList(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cores[i]);
    if (j > i) out += "-" + std::to_string(cores[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<std::string>> SplitCores(const std::vector<int>& cores, int workers) {
  if (workers < 1) return InvalidArgument("--workers: need at least one worker");
  if (cores.size() < static_cast<size_t>(workers)) {
    return InvalidArgument("--workers: " + std::to_string(workers) + " workers but only " +
                           std::to_string(cores.size()) +
                           " cores here; each local worker needs a core of its own");
  }
  std::vector<std::string> lists;
  const size_t n = static_cast<size_t>(workers);
  size_t next = 0;
  for (size_t w = 0; w < n; ++w) {
    const size_t take = cores.size() / n + (w < cores.size() % n ? 1 : 0);
    lists.push_back(FormatCoreList(std::vector<int>(cores.begin() + next, cores.begin() + next + take)));
    next += take;
  }
  return lists;
}

Result<std::vector<int>> AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return Internal(std::string("sched_getaffinity: ") + std::strerror(errno));
  }
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

}  // namespace drover::cli
