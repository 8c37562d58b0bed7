// Drives a net::EventLoop from a test thread: one callback at a time until a
// condition holds (checked after each callback, so no polling and no sleep)
// or a deadline passes.
//
// Thread safety: call from the thread that owns the loop, outside Run().
#ifndef DROVER_TESTS_REDIS_LOOP_RUNNER_H_
#define DROVER_TESTS_REDIS_LOOP_RUNNER_H_

#include <functional>

#include "common/time.h"
#include "net/event_loop.h"

namespace drover::testing {

// Runs callbacks until `done()` or `timeout` passes; returns done().
bool RunLoopUntil(net::EventLoop& loop, const std::function<bool()>& done, Duration timeout);

// Runs callbacks for `d` of real time.
void RunLoopFor(net::EventLoop& loop, Duration d);

}  // namespace drover::testing

#endif  // DROVER_TESTS_REDIS_LOOP_RUNNER_H_
