// AcceptPause: what the server's accept loop does after an accept failed.
//
// Out of file descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS,
// ENOMEM) the pending connection stays queued, so accepting again at once
// fails again at once: the loop spun at full CPU and wrote a log line per
// try (148 MB in 14 s with ~1,100 idle connections against a limit of
// 1,024). After such a failure the loop pauses, from 10 ms doubling to 1 s
// while the failures go on; a successful accept resets it. Other failures
// (a connection reset before it was accepted) concern one connection only:
// no pause. Log lines are limited to one per 10 s, each saying how many
// failures it stands for.
//
// Time comes in with each call, so tests drive it with a simulated clock.
//
// Thread safety: none; the server uses it on the loop thread.
#ifndef DROVER_NET_ACCEPT_PAUSE_H_
#define DROVER_NET_ACCEPT_PAUSE_H_

#include <cstdint>

#include "common/time.h"

namespace drover::net {

// At most one log line per period. Allow() says whether to write one now
// and how many events it stands for (this one and those held back since
// the previous line); 0 means stay silent.
class LogLimiter {
 public:
  explicit LogLimiter(Duration every = Seconds(10)) : every_(every) {}
  uint64_t Allow(Time now);

 private:
  Duration every_;
  Time last_{};
  bool logged_ = false;
  uint64_t held_ = 0;
};

class AcceptPause {
 public:
  static constexpr Duration kFirstPause = Millis(10);
  static constexpr Duration kLongestPause = Seconds(1);
  static constexpr Duration kLogEvery = Seconds(10);

  struct Step {
    Duration pause{0};    // wait this long before accepting again (0: at once)
    bool log = false;     // write a log line now
    uint64_t failures = 0;  // when log: failures since the previous line, this one included
  };

  // An accept failed with `error` (an errno value) at `now`.
  Step OnFailure(int error, Time now);

  // An accept succeeded: the next resource failure pauses kFirstPause again.
  void OnSuccess() { pause_ = Duration(0); }

  // True for the errors that pause: EMFILE, ENFILE, ENOBUFS, ENOMEM.
  static bool OutOfResources(int error);

 private:
  Duration pause_{0};
  LogLimiter log_{kLogEvery};
};

}  // namespace drover::net

#endif  // DROVER_NET_ACCEPT_PAUSE_H_
