// Reactor and EpollLoop: the worker's single-threaded event loop.
//
// The executor never blocks and never polls: it hands the fds it waits on
// (task pidfds, output pipes, grace timers) to a Reactor and is called back
// when one becomes readable. Reactor is the small interface the executor
// needs; EpollLoop is the epoll-based implementation used by the tests, the
// bench and the worker until the agent shell supplies its own (an asio
// io_context can implement Reactor with posix::stream_descriptor).
//
// Threading: a Reactor and everything registered on it belong to one thread.
// Callbacks run on that thread, inside RunOnce/RunUntil.
#ifndef DROVER_WORKER_EXEC_EVENT_LOOP_H_
#define DROVER_WORKER_EXEC_EVENT_LOOP_H_

#include <functional>
#include <memory>
#include <unordered_map>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

class Reactor {
 public:
  using Callback = std::function<void()>;

  Reactor() = default;
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;
  virtual ~Reactor() = default;

  // Calls `on_readable` each time `fd` is readable (level-triggered; hang-up
  // and error count as readable so the owner sees EOF). The fd stays owned
  // by the caller, who must Unwatch it before closing it. Fails if the fd is
  // already watched or the kernel refuses it.
  virtual Status Watch(int fd, Callback on_readable) = 0;

  // Stops watching `fd`. Safe to call from inside that fd's own callback,
  // and for an fd that is not watched (no-op).
  virtual void Unwatch(int fd) = 0;
};

class EpollLoop final : public Reactor {
 public:
  // Fails only if epoll_create1 fails (fd exhaustion).
  static Result<std::unique_ptr<EpollLoop>> Create();
  ~EpollLoop() override;

  Status Watch(int fd, Callback on_readable) override;
  void Unwatch(int fd) override;

  // Waits up to `timeout` (negative: forever) for events and runs the
  // callbacks of the ready fds. Returns how many callbacks ran (0 on
  // timeout). Fails only on an epoll_wait error other than EINTR.
  Result<int> RunOnce(Duration timeout = Duration(-1));

  // Runs events until `done()` is true, checked after each batch. Returns
  // DeadlineExceeded if `deadline` (wall time from now) passes first; this is
  // a guard for tests, never a polling interval: the loop sleeps in
  // epoll_wait until an event arrives.
  Status RunUntil(const std::function<bool()>& done, Duration deadline);

  size_t watched() const { return callbacks_.size(); }

 private:
  explicit EpollLoop(int epfd) : epfd_(epfd) {}

  int epfd_;
  // Shared so that a callback that Unwatches itself is not destroyed while
  // it runs.
  std::unordered_map<int, std::shared_ptr<Callback>> callbacks_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_EVENT_LOOP_H_
