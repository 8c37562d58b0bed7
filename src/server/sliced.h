// RunSliced: long work on the server's one event loop, cut into slices.
//
// A read or a cancel of a million-task job done in one go would hold the
// loop for seconds, and everything else waits meanwhile: worker heartbeats
// and results, lease renewals, other requests. Such work
// is written as a step that does one bounded slice and says whether it is
// done; RunSliced runs the first slice at once (small work finishes inside
// the call, as before) and each further one from a post, so whatever became
// ready in between runs between two slices.
//
//   RunSliced(loop, alive, [state] {
//     SliceBudget budget;
//     while (state->more()) { state->DoOne(); if (budget.Spent()) return false; }
//     return true;
//   });
//
// The work must hold what it needs itself (the step is called from later
// turns) and cope with what changed between slices. Once `guard` has
// expired (its owner is gone: the server stopped) no further slice runs.
//
// Thread safety: the loop's thread.
#ifndef DROVER_SERVER_SLICED_H_
#define DROVER_SERVER_SLICED_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "common/time.h"
#include "net/event_loop.h"

namespace drover::server {

// How long one slice may hold the loop, and the clock that says when a
// slice has used it up: a step runs items while !Spent(). The clock is read
// every kCheckEvery items, so an item must be small (one task).
class SliceBudget {
 public:
  static constexpr std::chrono::microseconds kSlice{4000};
  static constexpr uint32_t kCheckEvery = 64;

  SliceBudget() : end_(kSlice) {}
  bool Spent() {
    if (++count_ % kCheckEvery != 0) return false;
    return end_.Passed();
  }
  // For items that are batches themselves: reads the clock every call.
  bool SpentNow() const { return end_.Passed(); }

 private:
  Deadline end_;
  uint32_t count_ = 0;
};

inline void RunSliced(net::EventLoop& loop, std::weak_ptr<bool> guard,
                      std::function<bool()> step) {
  if (guard.expired() || step()) return;
  loop.Post([&loop, guard = std::move(guard), step = std::move(step)]() mutable {
    RunSliced(loop, std::move(guard), std::move(step));
  });
}

}  // namespace drover::server

#endif  // DROVER_SERVER_SLICED_H_
