#include "cli/stop_signals.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace drover::cli {

namespace {

sigset_t StopSet(bool reload) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (reload) sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockStopSignals(bool reload) {
  sigset_t set = StopSet(reload);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopSignals::StopSignals(int fd, std::function<void(int)> on_signal)
    : fd_(fd), on_signal_(std::move(on_signal)) {}

Result<std::unique_ptr<StopSignals>> StopSignals::Watch(net::EventLoop& loop,
                                                        std::function<void(int)> on_signal,
                                                        bool reload) {
  sigset_t set = StopSet(reload);
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return Internal(std::string("signalfd: ") + std::strerror(errno));
  std::unique_ptr<StopSignals> s(new StopSignals(fd, std::move(on_signal)));
  StopSignals* self = s.get();
  s->watch_ = std::make_unique<net::FdWatch>(loop, fd, [self] {
    signalfd_siginfo info;
    while (read(self->fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      self->on_signal_(static_cast<int>(info.ssi_signo));
    }
  });
  RETURN_IF_ERROR(s->watch_->status());
  return s;
}

StopSignals::~StopSignals() {
  watch_.reset();
  close(fd_);
}

}  // namespace drover::cli
