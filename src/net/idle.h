// Idle callbacks for an EventLoop: work that runs once the loop has nothing
// ready to run, so that it can take in the rest of a burst.
//
//   PostWhenIdle(loop, [&] { journal.Flush(); });
//
// "Nothing ready" means every queued callback has run, and so has every
// callback that those made ready at once (a socket that already holds the
// next message, a write that completed: the loop asks epoll without
// waiting), or kMaxBeforeIdle of them have, whichever comes first, so that
// a loop that never runs dry still gets there. The use: a journal's group
// commit, where the records of messages that arrived together (a worker's
// `finished` and its next `started`) share one fsync.
//
// EventLoop::Run() and EventLoop::Poll() run idle callbacks; a test helper
// that drives the loop one callback at a time uses RunOneFor.
//
// Kept out of event_loop.h so that the many files that include it need not
// change. Thread safety: the loop's thread only.
#ifndef DROVER_NET_IDLE_H_
#define DROVER_NET_IDLE_H_

#include <cstddef>
#include <functional>

#include "common/time.h"
#include "net/event_loop.h"

namespace drover::net {

inline constexpr int kMaxBeforeIdle = 64;

// Queues `fn` for the loop's next idle point. Idle callbacks run in order;
// one that queues another makes it wait for the idle point after.
void PostWhenIdle(EventLoop& loop, std::function<void()> fn);

// Runs one callback, waiting for it at most `timeout`, then (when idle
// callbacks wait) what is ready and the idle callbacks, as Run() would.
// Returns how many callbacks ran before the idle ones. A Stop() is
// cleared. Outside Run() only.
size_t RunOneFor(EventLoop& loop, Duration timeout);

}  // namespace drover::net

#endif  // DROVER_NET_IDLE_H_
