// TimerQueue: the scheduler's timers (retry backoff, timeouts, lost-worker
// expiry, start deadlines), fired by Tick in time order.
//
// Internal to src/core. The core reads no clock: a timer is a time in the
// same microseconds as the events' `now`, and OnTick (ticks_ops.h) pops
// the ones that are due.
//
// Invariants: timers fire in (at_us, push order): two due at the same time
// fire in the order they were pushed, so a run does not depend on the
// heap's layout. A timer is never cancelled: it names its task and attempt,
// and when it fires OnTick checks that the task is still in the state the
// timer was set for (queued with that attempt in backoff, running that
// attempt, ...); a stale timer does nothing.
//
// Changed by PushTimer (ticks.cc, restore.cc) and OnTick.
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_TIMERS_H_
#define DROVER_CORE_TIMERS_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "core/task_queue.h"

namespace drover::core {

// kStartDeadline: an assigned attempt its worker has not reported started
// (SchedulerConfig::start_timeout).
enum class TimerKind : uint8_t { kRetry, kTimeout, kLostExpiry, kStartDeadline, kOutputsLost };

struct Timer {
  int64_t at_us = 0;
  uint64_t seq = 0;  // push order
  TimerKind kind = TimerKind::kRetry;
  TaskRef task;
  uint32_t attempt = 0;
  friend bool operator>(const Timer& a, const Timer& b) {
    return a.at_us != b.at_us ? a.at_us > b.at_us : a.seq > b.seq;
  }
};

class TimerQueue {
 public:
  // Adds a timer for attempt `attempt` of `task`, due at `at_us`.
  void Push(int64_t at_us, TimerKind kind, TaskRef task, uint32_t attempt) {
    heap_.push(Timer{at_us, seq_++, kind, task, attempt});
  }
  // True when the earliest timer is due at `now_us`.
  bool Due(int64_t now_us) const { return !heap_.empty() && heap_.top().at_us <= now_us; }
  // Removes and returns the earliest timer; the queue must not be empty.
  Timer Pop() {
    Timer timer = heap_.top();
    heap_.pop();
    return timer;
  }
  size_t size() const { return heap_.size(); }

 private:
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> heap_;
  uint64_t seq_ = 0;
};

}  // namespace drover::core

#endif  // DROVER_CORE_TIMERS_H_
