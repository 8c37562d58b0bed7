#include "tests/redis/loop_runner.h"

#include <chrono>

#include "net/idle.h"

namespace drover::testing {

bool RunLoopUntil(net::EventLoop& loop, const std::function<bool()>& done, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Through the loop, so that its idle callbacks (the journal flush) run.
    net::RunOneFor(loop, std::chrono::duration_cast<Duration>(deadline - now));
  }
  return done();
}

void RunLoopFor(net::EventLoop& loop, Duration d) {
  RunLoopUntil(loop, [] { return false; }, d);
}

}  // namespace drover::testing
