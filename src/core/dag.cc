#include "core/dag.h"

#include <map>
#include <string>

#include "core/input_select.h"

namespace drover::core {

Result<GroupGraph> BuildGroupGraph(const JobSpec& spec) {
  const size_t n = spec.groups.size();
  if (n == 0) return InvalidArgument("job has no tasks");
  if (n > 65535) return InvalidArgument("job has more than 65535 [[task]] entries");
  std::map<std::string, uint32_t> by_name;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = spec.groups[i].name;
    if (name.empty() && n > 1) {
      return InvalidArgument("task " + std::to_string(i) + " has no id (needed with several tasks)");
    }
    if (!by_name.emplace(name, static_cast<uint32_t>(i)).second) {
      return InvalidArgument("task id \"" + name + "\" is used twice");
    }
  }
  GroupGraph graph;
  graph.deps.resize(n);
  graph.dependents.resize(n);
  for (size_t i = 0; i < n; ++i) {
    for (const std::string& dep : spec.groups[i].depends_on) {
      auto it = by_name.find(dep);
      if (it == by_name.end()) {
        return InvalidArgument("task \"" + spec.groups[i].name + "\" depends on unknown task \"" +
                               dep + "\"");
      }
      if (it->second == i) {
        return InvalidArgument("task \"" + dep + "\" depends on itself");
      }
      graph.deps[i].push_back(it->second);
      graph.dependents[it->second].push_back(static_cast<uint32_t>(i));
    }
    RETURN_IF_ERROR(CheckInputs(spec.groups[i]));
  }
  // Depth-first search with colours; a grey node reached again closes a cycle.
  std::vector<uint8_t> colour(n, 0);
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t root = 0; root < n; ++root) {
    if (colour[root] != 0) continue;
    stack.push_back({root, 0});
    colour[root] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < graph.deps[node].size()) {
        uint32_t dep = graph.deps[node][next++];
        if (colour[dep] == 1) {
          return InvalidArgument("tasks \"" + spec.groups[node].name + "\" and \"" +
                                 spec.groups[dep].name + "\" depend on each other (cycle)");
        }
        if (colour[dep] == 0) {
          colour[dep] = 1;
          stack.push_back({dep, 0});
        }
      } else {
        colour[node] = 2;
        stack.pop_back();
      }
    }
  }
  return graph;
}

}  // namespace drover::core
