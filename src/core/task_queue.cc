#include "core/task_queue.h"

#include <cassert>

namespace drover::core {

uint32_t TaskQueues::ClassOf(const ResourceRequest& request) {
  auto [it, inserted] = ids_.emplace(request, static_cast<uint32_t>(classes_.size()));
  if (inserted) {
    classes_.emplace_back();
    classes_.back().request = request;
  }
  return it->second;
}

void TaskQueues::RefreshHead(uint32_t cls) {
  Class& c = classes_[cls];
  if (c.size == 0) {
    if (c.in_heads) heads_.erase(c.head_key);
    c.in_heads = false;
    return;
  }
  const auto& [priority, level] = *c.levels.begin();
  const HeadKey key{-static_cast<int64_t>(priority), level.front().seq, cls};
  if (!c.in_heads) {
    heads_.insert(key);
  } else if (key != c.head_key) {
    // Re-key the existing node: no allocation per popped task.
    auto node = heads_.extract(c.head_key);
    node.value() = key;
    heads_.insert(std::move(node));
  }
  c.in_heads = true;
  c.head_key = key;
}

void TaskQueues::PushBackRange(uint32_t cls, int32_t priority, TaskRef first, uint32_t count) {
  if (count == 0) return;
  Class& c = classes_[cls];
  std::deque<Run>& level = c.levels[priority];
  const uint64_t seq = next_seq_;
  next_seq_ += count;
  c.size += count;
  if (!level.empty()) {
    Run& last = level.back();
    if (last.seq + last.count == seq && last.first.job == first.job &&
        last.first.index + last.count == first.index) {
      last.count += count;  // continues the run: the head did not change
      return;
    }
  }
  level.push_back(Run{seq, first, count});
  // Only a new head changes the class's place in the walk order.
  if (level.size() == 1 && c.levels.begin()->first == priority) RefreshHead(cls);
}

void TaskQueues::PushBack(uint32_t cls, int32_t priority, TaskRef task) {
  PushBackRange(cls, priority, task, 1);
}

void TaskQueues::PushFront(uint32_t cls, int32_t priority, TaskRef task) {
  Class& c = classes_[cls];
  std::deque<Run>& level = c.levels[priority];
  uint64_t seq = level.empty() ? next_seq_++ : level.front().seq - 1;
  level.push_front(Run{seq, task, 1});
  ++c.size;
  if (c.levels.begin()->first == priority) RefreshHead(cls);
}

QueueEntry TaskQueues::Head(uint32_t cls) const {
  assert(classes_[cls].size > 0);
  const Run& run = classes_[cls].levels.begin()->second.front();
  return QueueEntry{run.seq, run.first};
}

int32_t TaskQueues::HeadPriority(uint32_t cls) const {
  return classes_[cls].levels.begin()->first;
}

void TaskQueues::PopHead(uint32_t cls) {
  Class& c = classes_[cls];
  auto it = c.levels.begin();
  Run& run = it->second.front();
  if (--run.count == 0) {
    it->second.pop_front();
    if (it->second.empty()) c.levels.erase(it);
  } else {
    ++run.seq;
    ++run.first.index;
  }
  --c.size;
  RefreshHead(cls);
}

void TaskQueues::ForEach(uint32_t cls, const std::function<bool(const QueueEntry&)>& f) const {
  for (const auto& [priority, level] : classes_[cls].levels) {
    for (const Run& run : level) {
      for (uint32_t i = 0; i < run.count; ++i) {
        if (!f(QueueEntry{run.seq + i, TaskRef{run.first.job, run.first.index + i}})) return;
      }
    }
  }
}

size_t TaskQueues::ApproxBytes() const {
  size_t bytes = classes_.capacity() * sizeof(Class) + heads_.size() * 64;
  for (const Class& c : classes_) {
    for (const auto& [priority, level] : c.levels) bytes += level.size() * sizeof(Run) + 640;
  }
  return bytes;
}

}  // namespace drover::core
