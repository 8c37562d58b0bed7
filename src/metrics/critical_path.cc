#include "metrics/critical_path.h"

#include <algorithm>
#include <limits>

namespace drover::metrics {

namespace {

constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();

// Longest summed wall time of a dependency chain ending at `v` (inclusive),
// with the chosen predecessor of each node. Iterative DFS: job DAGs can be
// deep (a chain of thousands of groups) and recursion would risk the stack.
class Longest {
 public:
  explicit Longest(std::span<const PathNode> nodes)
      : nodes_(nodes), dist_(nodes.size(), kUnknown), next_(nodes.size(), SIZE_MAX),
        on_stack_(nodes.size(), false) {}

  void Solve(size_t root) {
    struct Frame {
      size_t node;
      size_t dep = 0;  // next dependency to look at
    };
    if (dist_[root] != kUnknown) return;
    std::vector<Frame> stack{{root}};
    on_stack_[root] = true;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const std::vector<size_t>& deps = nodes_[f.node].deps;
      if (f.dep < deps.size()) {
        const size_t d = deps[f.dep++];
        if (d >= nodes_.size() || on_stack_[d] || dist_[d] != kUnknown) continue;
        on_stack_[d] = true;
        stack.push_back({d});
        continue;
      }
      // All dependencies solved: pick the best one.
      size_t best = SIZE_MAX;
      for (size_t d : deps) {
        if (d >= nodes_.size() || dist_[d] == kUnknown) continue;  // out of range or a cycle
        if (best == SIZE_MAX || Better(d, best)) best = d;
      }
      dist_[f.node] = nodes_[f.node].wall + (best == SIZE_MAX ? 0 : dist_[best]);
      next_[f.node] = best;
      on_stack_[f.node] = false;
      stack.pop_back();
    }
  }

  size_t predecessor(size_t v) const { return next_[v]; }

 private:
  bool Better(size_t a, size_t b) const {
    if (dist_[a] != dist_[b]) return dist_[a] > dist_[b];
    const int64_t ea = nodes_[a].end.value_or(kUnknown);
    const int64_t eb = nodes_[b].end.value_or(kUnknown);
    if (ea != eb) return ea > eb;
    return a < b;
  }

  std::span<const PathNode> nodes_;
  std::vector<int64_t> dist_;
  std::vector<size_t> next_;
  std::vector<bool> on_stack_;
};

}  // namespace

std::vector<size_t> CriticalPath(std::span<const PathNode> nodes) {
  size_t last = SIZE_MAX;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].end) continue;
    if (last == SIZE_MAX || *nodes[i].end > *nodes[last].end) last = i;
  }
  if (last == SIZE_MAX) return {};
  Longest longest(nodes);
  longest.Solve(last);
  std::vector<size_t> path;
  for (size_t v = last; v != SIZE_MAX; v = longest.predecessor(v)) path.push_back(v);
  std::reverse(path.begin(), path.end());
  return path;
}

int64_t PathLength(std::span<const PathNode> nodes, std::span<const size_t> path) {
  int64_t sum = 0;
  for (size_t i : path) sum += nodes[i].wall;
  return sum;
}

}  // namespace drover::metrics
