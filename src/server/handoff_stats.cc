#include "server/handoff_stats.h"

#include <algorithm>

namespace drover::server {

void HandoffStats::Exited(WorkerId worker, Time at) {
  std::deque<Time>& q = waiting_[worker];
  // Results of one batch may be reported out of order; keep the queue sorted.
  q.insert(std::upper_bound(q.begin(), q.end(), at), at);
  while (q.size() > max_waiting_) q.pop_front();
}

void HandoffStats::Started(WorkerId worker, Time at) {
  auto it = waiting_.find(worker);
  if (it == waiting_.end() || it->second.empty() || it->second.front() > at) return;
  const int64_t us = (at - it->second.front()).count();
  it->second.pop_front();
  if (it->second.empty()) waiting_.erase(it);
  ++count_;
  if (samples_.size() < window_) {
    samples_.push_back(us);
  } else {
    samples_[next_] = us;
    next_ = (next_ + 1) % window_;
  }
}

HandoffSummary Summarize(std::vector<int64_t> sorted, uint64_t count) {
  HandoffSummary s;
  s.count = count;
  if (sorted.empty()) return s;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest sample with at least p% of them at or below.
  auto rank = [&](double p) {
    size_t k = static_cast<size_t>(p * static_cast<double>(sorted.size()) + 0.999999);
    return sorted[std::clamp<size_t>(k, 1, sorted.size()) - 1];
  };
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  s.max_us = sorted.back();
  return s;
}

HandoffSummary HandoffStats::Summary() const { return Summarize(samples_, count_); }

}  // namespace drover::server
