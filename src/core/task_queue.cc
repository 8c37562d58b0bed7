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
  if (c.in_heads) heads_.erase(c.head_key);
  c.in_heads = c.size > 0;
  if (!c.in_heads) return;
  const auto& [priority, level] = *c.levels.begin();
  c.head_key = {-static_cast<int64_t>(priority), level.front().seq, cls};
  heads_.insert(c.head_key);
}

void TaskQueues::PushBack(uint32_t cls, int32_t priority, TaskRef task) {
  Class& c = classes_[cls];
  std::deque<QueueEntry>& level = c.levels[priority];
  level.push_back(QueueEntry{next_seq_++, task});
  ++c.size;
  // Only a new head changes the class's place in the walk order.
  if (level.size() == 1 && c.levels.begin()->first == priority) RefreshHead(cls);
}

void TaskQueues::PushFront(uint32_t cls, int32_t priority, TaskRef task) {
  Class& c = classes_[cls];
  std::deque<QueueEntry>& level = c.levels[priority];
  uint64_t seq = level.empty() ? next_seq_++ : level.front().seq - 1;
  level.push_front(QueueEntry{seq, task});
  ++c.size;
  if (c.levels.begin()->first == priority) RefreshHead(cls);
}

const QueueEntry& TaskQueues::Head(uint32_t cls) const {
  assert(classes_[cls].size > 0);
  return classes_[cls].levels.begin()->second.front();
}

int32_t TaskQueues::HeadPriority(uint32_t cls) const {
  return classes_[cls].levels.begin()->first;
}

void TaskQueues::PopHead(uint32_t cls) {
  Class& c = classes_[cls];
  auto it = c.levels.begin();
  it->second.pop_front();
  if (it->second.empty()) c.levels.erase(it);
  --c.size;
  RefreshHead(cls);
}

void TaskQueues::ForEach(uint32_t cls, const std::function<bool(const QueueEntry&)>& f) const {
  for (const auto& [priority, level] : classes_[cls].levels) {
    for (const QueueEntry& e : level) {
      if (!f(e)) return;
    }
  }
}

size_t TaskQueues::ApproxBytes() const {
  size_t bytes = classes_.capacity() * sizeof(Class) + heads_.size() * 64;
  for (const Class& c : classes_) bytes += c.size * sizeof(QueueEntry) + c.levels.size() * 640;
  return bytes;
}

}  // namespace drover::core
