#include "core/task_queue.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <utility>

namespace drover::core {

uint32_t TaskQueues::ClassOf(const ResourceRequest& request) {
  auto [it, inserted] = ids_.emplace(request, static_cast<uint32_t>(classes_.size()));
  if (inserted) {
    classes_.emplace_back();
    classes_.back().request = request;
  }
  return it->second;
}

TaskQueues::Level& TaskQueues::LevelOf(Class& c, int32_t priority) {
  auto it = c.levels.find(priority);
  if (it != c.levels.end()) return it->second;
  if (c.spare.empty()) return c.levels[priority];
  c.spare.key() = priority;
  return c.levels.insert(std::move(c.spare)).position->second;
}

TaskQueues::Lane& TaskQueues::LaneOf(uint32_t cls, Level& level, uint32_t user) {
  Lane* found = nullptr;
  for (Lane& lane : level.lanes) {
    if (lane.user == user) found = &lane;
  }
  if (found == nullptr && level.lanes.size() == 1 && level.lanes[0].runs.empty()) {
    found = &level.lanes[0];  // a kept level's lane (LevelOf): anyone's now
    found->user = user;
  }
  if (found != nullptr && !found->runs.empty()) return *found;
  // A lane the user gets now: its class is one of theirs (SetStanding).
  if (user_classes_.size() <= user) user_classes_.resize(user + 1);
  std::vector<uint32_t>& mine = user_classes_[user];
  if (std::find(mine.begin(), mine.end(), cls) == mine.end()) mine.push_back(cls);
  if (found != nullptr) return *found;
  level.lanes.push_back(Lane{user, {}});
  return level.lanes.back();
}

void TaskQueues::PickHead(Level& level) const {
  if (level.lanes.size() < 2) {
    level.head = 0;
    return;
  }
  uint32_t best = 0;
  auto key = [&](const Lane& lane) {
    return std::make_pair(Standing(lane.user), lane.runs.front().seq);
  };
  for (uint32_t i = 1; i < level.lanes.size(); ++i) {
    if (key(level.lanes[i]) < key(level.lanes[best])) best = i;
  }
  level.head = best;
}

void TaskQueues::RefreshHead(uint32_t cls) {
  Class& c = classes_[cls];
  if (c.size == 0) {
    if (c.in_heads) heads_.erase(c.head_it);
    c.in_heads = false;
    return;
  }
  const auto& [priority, level] = *c.levels.begin();
  const Lane& lane = level.lanes[level.head];
  const HeadKey key{-static_cast<int64_t>(priority), Standing(lane.user), lane.runs.front().seq,
                    cls};
  if (!c.in_heads) {
    c.head_it = heads_.insert(key).first;
  } else if (key != *c.head_it) {
    // Re-key the existing node: no allocation per popped task, and with
    // its old successor as the hint, no search when its place is the same.
    const auto next = std::next(c.head_it);
    auto node = heads_.extract(c.head_it);
    node.value() = key;
    c.head_it = heads_.insert(next, std::move(node));
  }
  c.in_heads = true;
}

void TaskQueues::PushBackRange(uint32_t cls, int32_t priority, uint32_t user, TaskRef first,
                               uint32_t count) {
  if (count == 0) return;
  Class& c = classes_[cls];
  Level& level = LevelOf(c, priority);
  Lane& lane = LaneOf(cls, level, user);
  const uint64_t seq = next_seq_;
  next_seq_ += count;
  c.size += count;
  if (!lane.runs.empty()) {
    Run& last = lane.runs.back();
    if (last.seq + last.count == seq && last.first.job == first.job &&
        last.first.index + last.count == first.index) {
      last.count += count;  // continues the run: the head did not change
      return;
    }
  }
  lane.runs.push_back(Run{seq, first, count});
  // Only a new lane can change the level's head (it is behind every entry
  // of the other lanes, so it goes first only by standing), and only a new
  // head of the first level changes the class's place in the walk order.
  if (lane.runs.size() == 1) {
    PickHead(level);
    if (c.levels.begin()->first == priority) RefreshHead(cls);
  }
}

void TaskQueues::PushBack(uint32_t cls, int32_t priority, uint32_t user, TaskRef task) {
  PushBackRange(cls, priority, user, task, 1);
}

void TaskQueues::PushFront(uint32_t cls, int32_t priority, uint32_t user, TaskRef task) {
  Class& c = classes_[cls];
  Level& level = LevelOf(c, priority);
  // Before every entry of the level, not only of its lane: with equal
  // standings it is the level's head, as it was before lanes.
  uint64_t seq = next_seq_;
  bool empty = true;
  for (const Lane& lane : level.lanes) {
    if (lane.runs.empty()) continue;  // a kept level's lane (LevelOf)
    seq = std::min(seq, lane.runs.front().seq);
    empty = false;
  }
  if (empty) {
    ++next_seq_;
  } else {
    --seq;
  }
  LaneOf(cls, level, user).runs.push_front(Run{seq, task, 1});
  ++c.size;
  PickHead(level);
  if (c.levels.begin()->first == priority) RefreshHead(cls);
}

void TaskQueues::SetStanding(uint32_t user, double standing) {
  if (standings_.size() <= user) standings_.resize(user + 1, 0.0);
  if (standings_[user] == standing) return;
  standings_[user] = standing;
  if (user >= user_classes_.size()) return;
  std::vector<uint32_t>& mine = user_classes_[user];
  for (size_t i = 0; i < mine.size();) {
    const uint32_t cls = mine[i];
    Class& c = classes_[cls];
    bool has_lane = false;
    for (auto& [priority, level] : c.levels) {
      for (const Lane& lane : level.lanes) {
        if (lane.user != user) continue;
        has_lane = true;
        PickHead(level);
        break;
      }
    }
    if (!has_lane) {
      mine[i] = mine.back();
      mine.pop_back();
      continue;
    }
    RefreshHead(cls);
    ++i;
  }
}

QueueEntry TaskQueues::Head(uint32_t cls) const {
  assert(classes_[cls].size > 0);
  const Level& level = classes_[cls].levels.begin()->second;
  const Run& run = level.lanes[level.head].runs.front();
  return QueueEntry{run.seq, run.first};
}

int32_t TaskQueues::HeadPriority(uint32_t cls) const { return classes_[cls].levels.begin()->first; }

void TaskQueues::PopHead(uint32_t cls) {
  Class& c = classes_[cls];
  auto it = c.levels.begin();
  Level& level = it->second;
  Lane& lane = level.lanes[level.head];
  Run& run = lane.runs.front();
  if (--run.count == 0) {
    lane.runs.pop_front();
    if (lane.runs.empty() && level.lanes.size() > 1) {
      if (level.head + 1 != level.lanes.size()) {
        level.lanes[level.head] = std::move(level.lanes.back());
      }
      level.lanes.pop_back();
    }
  } else {
    ++run.seq;
    ++run.first.index;
  }
  --c.size;
  if (level.lanes[0].runs.empty()) {
    // The level emptied: kept, with its lane, for the next level made
    // (LevelOf), so a queue that empties and fills again allocates nothing.
    c.spare = c.levels.extract(it);
  } else if (level.lanes.size() > 1) {
    PickHead(level);
  } else {
    level.head = 0;
  }
  RefreshHead(cls);
}

void TaskQueues::ForEach(uint32_t cls, const std::function<bool(const QueueEntry&)>& f) const {
  // Lanes merged by (standing, seq), as PopHead would take them if no
  // standing changed: with equal standings, the level's arrival order.
  struct Cursor {
    const Lane* lane;
    size_t run;
    uint32_t i;
  };
  std::vector<Cursor> cursors;
  for (const auto& [priority, level] : classes_[cls].levels) {
    if (level.lanes.size() == 1) {  // one user at this level: its lane in order
      for (const Run& run : level.lanes[0].runs) {
        for (uint32_t i = 0; i < run.count; ++i) {
          if (!f(QueueEntry{run.seq + i, TaskRef{run.first.job, run.first.index + i}})) return;
        }
      }
      continue;
    }
    cursors.clear();
    for (const Lane& lane : level.lanes) cursors.push_back(Cursor{&lane, 0, 0});
    while (!cursors.empty()) {
      size_t best = 0;
      auto key = [&](const Cursor& c) {
        return std::make_pair(Standing(c.lane->user), c.lane->runs[c.run].seq + c.i);
      };
      for (size_t k = 1; k < cursors.size(); ++k) {
        if (key(cursors[k]) < key(cursors[best])) best = k;
      }
      Cursor& c = cursors[best];
      const Run& run = c.lane->runs[c.run];
      if (!f(QueueEntry{run.seq + c.i, TaskRef{run.first.job, run.first.index + c.i}})) return;
      if (++c.i == run.count) {
        c.i = 0;
        if (++c.run == c.lane->runs.size()) {
          cursors[best] = cursors.back();
          cursors.pop_back();
        }
      }
    }
  }
}

size_t TaskQueues::ApproxBytes() const {
  size_t bytes = classes_.capacity() * sizeof(Class) + heads_.size() * 64 +
                 standings_.capacity() * sizeof(double);
  for (const Class& c : classes_) {
    for (const auto& [priority, level] : c.levels) {
      bytes += 64 + level.lanes.capacity() * sizeof(Lane);
      for (const Lane& lane : level.lanes) bytes += lane.runs.size() * sizeof(Run) + 640;
    }
  }
  return bytes;
}

}  // namespace drover::core
