// AsioReactor: the executor's Reactor (event_loop.h) on a net::EventLoop.
//
// The agent runs everything on one net::EventLoop: the WebSocket to the
// server, its timers, and the executor's pidfds, output pipes and grace
// timerfds. This adapter lets the executor register its fds there, one
// net::FdWatch per fd, so the worker needs no second loop or thread.
//
// Threading: belongs to the loop's thread, like the FdWatches it makes
// (it may be created before the loop runs, on the thread that will run it).
// The loop must outlive it.
#ifndef DROVER_WORKER_AGENT_ASIO_REACTOR_H_
#define DROVER_WORKER_AGENT_ASIO_REACTOR_H_

#include <memory>
#include <unordered_map>

#include "net/event_loop.h"
#include "worker/exec/event_loop.h"

namespace drover::worker {

class AsioReactor final : public Reactor {
 public:
  explicit AsioReactor(net::EventLoop& loop) : loop_(loop) {}
  ~AsioReactor() override;

  // Fails with AlreadyExists if `fd` is watched, or with the FdWatch's error
  // if the loop cannot watch it (a regular file, say).
  Status Watch(int fd, Callback on_readable) override;
  // No-op for an fd that is not watched; safe from the fd's own callback.
  void Unwatch(int fd) override;

  size_t watched() const { return watches_.size(); }

 private:
  net::EventLoop& loop_;
  std::unordered_map<int, std::unique_ptr<net::FdWatch>> watches_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_ASIO_REACTOR_H_
