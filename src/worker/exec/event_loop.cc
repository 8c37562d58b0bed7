#include "worker/exec/event_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace drover::worker {

Result<std::unique_ptr<EpollLoop>> EpollLoop::Create() {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return Internal(std::string("epoll_create1: ") + strerror(errno));
  return std::unique_ptr<EpollLoop>(new EpollLoop(fd));
}

EpollLoop::~EpollLoop() { close(epfd_); }

Status EpollLoop::Watch(int fd, Callback on_readable) {
  if (callbacks_.count(fd) != 0) {
    return AlreadyExists("fd " + std::to_string(fd) + " is already watched");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Internal("epoll_ctl add fd " + std::to_string(fd) + ": " + strerror(errno));
  }
  callbacks_[fd] = std::make_shared<Callback>(std::move(on_readable));
  return Status::Ok();
}

void EpollLoop::Unwatch(int fd) {
  if (callbacks_.erase(fd) == 0) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

Result<int> EpollLoop::RunOnce(Duration timeout) {
  epoll_event events[64];
  int timeout_ms = -1;
  if (timeout.count() >= 0) {
    // Round up so a short positive timeout does not become a busy 0 ms wait.
    timeout_ms = static_cast<int>((timeout.count() + 999) / 1000);
  }
  int n = epoll_wait(epfd_, events, 64, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return Internal(std::string("epoll_wait: ") + strerror(errno));
  }
  int ran = 0;
  for (int i = 0; i < n; ++i) {
    // An earlier callback in this batch may have unwatched (and closed) this
    // fd; look it up afresh.
    auto it = callbacks_.find(events[i].data.fd);
    if (it == callbacks_.end()) continue;
    std::shared_ptr<Callback> cb = it->second;
    (*cb)();
    ++ran;
  }
  return ran;
}

Status EpollLoop::RunUntil(const std::function<bool()>& done, Duration deadline) {
  const Deadline end(deadline);
  while (!done()) {
    const Duration left = end.Left();
    if (left.count() <= 0)
      return Status(StatusCode::kDeadlineExceeded, "event loop deadline passed");
    ASSIGN_OR_RETURN(int ran, RunOnce(left));
    (void)ran;
  }
  return Status::Ok();
}

}  // namespace drover::worker
