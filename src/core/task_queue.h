// TaskQueues: the ready tasks, one queue per resource class.
//
// A resource class is every task with the same ResourceRequest; each class
// has its own queue, ordered by priority (higher first), then by its user's
// fair-share standing (lower first, SetStanding), then FIFO, so a big GPU
// task at the head of its class never blocks small CPU tasks of another
// class. The heads of all non-empty classes are kept in one ordered set,
// which is the scheduler's walk order when resources free up.
//
// Within a priority level each user has a lane of their own (FIFO); the
// level's head is the front of the lane whose user stands lowest, the
// earliest front among equal standings. With every standing equal (fair
// share off, or one user) that is exactly one FIFO per level.
//
// Entries are removed lazily: a canceled task stays in its queue until it
// reaches the head, where the scheduler pops it (PopHead). That keeps
// cancel O(1) per task.
//
// Storage is by runs: consecutive tasks of one job pushed back one after
// the other (an array group, in index order) share one 24-byte run, so a
// 1,000,000-task array costs a few runs, and PushBackRange adds a whole
// group in O(1). Head/PopHead walk a run one task at a time; every task
// keeps its own place (seq) in the global arrival order. A pop or push at
// a level looks at each lane of that level once (users with tasks queued
// there at that priority).
//
// Thread safety: not synchronised; owned by the scheduler.
#ifndef DROVER_CORE_TASK_QUEUE_H_
#define DROVER_CORE_TASK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
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
  // The class of a request, if one was made for it.
  std::optional<uint32_t> FindClass(const ResourceRequest& request) const {
    auto it = ids_.find(request);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const ResourceRequest& request(uint32_t cls) const { return classes_[cls].request; }
  size_t class_count() const { return classes_.size(); }

  // Appends at the back of its user's lane at its priority level (a new
  // arrival). `user` is the scheduler's dense user index.
  void PushBack(uint32_t cls, int32_t priority, uint32_t user, TaskRef task);
  // Appends `count` tasks first, first+1, ... of one job, as `count`
  // PushBack calls in index order would, in O(1).
  void PushBackRange(uint32_t cls, int32_t priority, uint32_t user, TaskRef first, uint32_t count);
  // Puts back at the front of its user's lane, with a seq before every
  // entry of its level (a task that was at the head and could not be kept:
  // lease rejected, quota parked and released).
  void PushFront(uint32_t cls, int32_t priority, uint32_t user, TaskRef task);

  // A user's fair-share standing (lower goes first among equal
  // priorities; 0 until set). Re-orders every level where the user has
  // tasks; a value equal to the current one changes nothing.
  void SetStanding(uint32_t user, double standing);
  double Standing(uint32_t user) const { return user < standings_.size() ? standings_[user] : 0.0; }

  bool Empty(uint32_t cls) const { return classes_[cls].size == 0; }
  // Entries (live or not yet popped) in the class.
  size_t Size(uint32_t cls) const { return classes_[cls].size; }
  // The head of a non-empty class.
  QueueEntry Head(uint32_t cls) const;
  int32_t HeadPriority(uint32_t cls) const;
  void PopHead(uint32_t cls);

  // A class's place in the walk: (-priority, the head's user's standing,
  // seq, class), compared in that order (by hand: cheaper than a tuple's
  // synthesized three-way compare on B1's path).
  struct HeadKey {
    int64_t neg_priority = 0;
    double standing = 0;
    uint64_t seq = 0;
    uint32_t cls = 0;
    friend bool operator==(const HeadKey&, const HeadKey&) = default;
    friend bool operator<(const HeadKey& a, const HeadKey& b) {
      if (a.neg_priority != b.neg_priority) return a.neg_priority < b.neg_priority;
      if (a.standing != b.standing) return a.standing < b.standing;
      if (a.seq != b.seq) return a.seq < b.seq;
      return a.cls < b.cls;
    }
  };
  // The ordered heads. Iterate to walk classes in the order their heads
  // should run. Invalidated by Push/PopHead/SetStanding.
  const std::set<HeadKey>& heads() const { return heads_; }
  static uint32_t ClassOfKey(const HeadKey& key) { return key.cls; }
  // The key of a non-empty class's head (its place in heads()).
  const HeadKey& HeadKeyOf(uint32_t cls) const { return *classes_[cls].head_it; }

  // Calls f(entry) for each entry of the class until f returns false:
  // level by level, and within a level lane by lane in head order (lowest
  // standing first) as they stand now.
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
  // One user's entries at one level, FIFO.
  struct Lane {
    uint32_t user = 0;
    std::deque<Run> runs;
  };
  // One priority level: never empty while in Class::levels; lanes are never
  // empty either. `head` indexes the lane whose front goes first. (A level
  // kept in Class::spare has one lane, empty.)
  struct Level {
    std::vector<Lane> lanes;
    uint32_t head = 0;
  };
  struct Class {
    ResourceRequest request;
    std::map<int32_t, Level, std::greater<>> levels;
    size_t size = 0;
    bool in_heads = false;
    std::set<HeadKey>::iterator head_it;  // its node in heads_, while in_heads
    // The last level that emptied, with its one lane, reused by the next
    // level made (LevelOf): filling and emptying allocates nothing.
    std::map<int32_t, Level, std::greater<>>::node_type spare;
  };
  Level& LevelOf(Class& c, int32_t priority);
  Lane& LaneOf(uint32_t cls, Level& level, uint32_t user);
  void PickHead(Level& level) const;
  void RefreshHead(uint32_t cls);

  std::vector<Class> classes_;
  std::map<ResourceRequest, uint32_t> ids_;
  std::set<HeadKey> heads_;
  std::vector<double> standings_;  // by user
  // Classes where each user may have a lane (a superset: pruned when
  // SetStanding finds none).
  std::vector<std::vector<uint32_t>> user_classes_;
  // Arrivals count up from the middle of the range; entries put back at the
  // front take a number just below the entry they go before.
  uint64_t next_seq_ = uint64_t{1} << 62;
};

}  // namespace drover::core

#endif  // DROVER_CORE_TASK_QUEUE_H_
