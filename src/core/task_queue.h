// TaskQueues: the ready tasks, one queue per resource class.
//
// A resource class is every task with the same ResourceRequest; each class
// has its own queue, ordered by priority (higher first) then FIFO, so a big
// GPU task at the head of its class never blocks small CPU tasks of another
// class. The heads of all non-empty classes are kept in one ordered set,
// which is the scheduler's walk order when resources free up.
//
// Entries are removed lazily: a canceled task stays in its queue until it
// reaches the head, where the scheduler pops it (PopHead). That keeps
// cancel O(1) per task.
//
// Storage is by runs: consecutive tasks of one job pushed back one after
// the other (an array group, in index order) share one 24-byte run, so a
// 1,000,000-task array costs a few runs, and PushBackRange adds a whole
// group in O(1). Head/PopHead walk a run one task at a time; every task
// keeps its own place (seq) in the global arrival order.
//
// Thread safety: not synchronised; owned by the scheduler.
#ifndef DROVER_CORE_TASK_QUEUE_H_
#define DROVER_CORE_TASK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "core/resources.h"

namespace drover::core {

// A task by the scheduler's dense job slot and the task's index in its job.
struct TaskRef {
  uint32_t job = 0;
  uint32_t index = 0;
  friend bool operator==(const TaskRef&, const TaskRef&) = default;
  friend auto operator<=>(const TaskRef&, const TaskRef&) = default;
};

struct QueueEntry {
  uint64_t seq = 0;  // global arrival order; FIFO within a priority
  TaskRef task;
};

class TaskQueues {
 public:
  // The class id of a request, creating the class on first use. Ids are
  // dense and stable.
  uint32_t ClassOf(const ResourceRequest& request);
  const ResourceRequest& request(uint32_t cls) const { return classes_[cls].request; }
  size_t class_count() const { return classes_.size(); }

  // Appends at the back of its priority level (a new arrival).
  void PushBack(uint32_t cls, int32_t priority, TaskRef task);
  // Appends `count` tasks first, first+1, ... of one job, as `count`
  // PushBack calls in index order would, in O(1).
  void PushBackRange(uint32_t cls, int32_t priority, TaskRef first, uint32_t count);
  // Puts back at the front of its priority level (a task that was at the
  // head and could not be kept: lease rejected, quota parked and released).
  void PushFront(uint32_t cls, int32_t priority, TaskRef task);

  bool Empty(uint32_t cls) const { return classes_[cls].size == 0; }
  // Entries (live or not yet popped) in the class.
  size_t Size(uint32_t cls) const { return classes_[cls].size; }
  // The head of a non-empty class.
  QueueEntry Head(uint32_t cls) const;
  int32_t HeadPriority(uint32_t cls) const;
  void PopHead(uint32_t cls);

  // The ordered heads: (-priority, seq, class). Iterate to walk classes in
  // the order their heads should run. Invalidated by Push/PopHead.
  using HeadKey = std::tuple<int64_t, uint64_t, uint32_t>;
  const std::set<HeadKey>& heads() const { return heads_; }

  // Calls f(entry) for each entry of the class in queue order until f
  // returns false.
  void ForEach(uint32_t cls, const std::function<bool(const QueueEntry&)>& f) const;

  size_t ApproxBytes() const;

 private:
  // Tasks first.index, first.index + 1, ... (count of them) of one job,
  // with seqs seq, seq + 1, ...
  struct Run {
    uint64_t seq = 0;
    TaskRef first;
    uint32_t count = 0;
  };
  struct Class {
    ResourceRequest request;
    std::map<int32_t, std::deque<Run>, std::greater<>> levels;
    size_t size = 0;
    bool in_heads = false;
    HeadKey head_key{};
  };
  void RefreshHead(uint32_t cls);

  std::vector<Class> classes_;
  std::map<ResourceRequest, uint32_t> ids_;
  std::set<HeadKey> heads_;
  // Arrivals count up from the middle of the range; entries put back at the
  // front take a number just below the entry they go before.
  uint64_t next_seq_ = uint64_t{1} << 62;
};

}  // namespace drover::core

#endif  // DROVER_CORE_TASK_QUEUE_H_
