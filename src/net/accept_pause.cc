#include "net/accept_pause.h"

#include <algorithm>
#include <cerrno>
#include <utility>

namespace drover::net {

uint64_t LogLimiter::Allow(Time now) {
  ++held_;
  if (logged_ && now - last_ < every_) return 0;
  logged_ = true;
  last_ = now;
  return std::exchange(held_, 0);
}

bool AcceptPause::OutOfResources(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

AcceptPause::Step AcceptPause::OnFailure(int error, Time now) {
  Step step;
  if (OutOfResources(error)) {
    pause_ = pause_ == Duration(0) ? kFirstPause : std::min(pause_ * 2, kLongestPause);
    step.pause = pause_;
  }
  step.failures = log_.Allow(now);
  step.log = step.failures > 0;
  return step;
}

}  // namespace drover::net
