// Exponential backoff with jitter, for reconnecting a worker or client after
// its connection drops (kUnavailable errors).
//
// The n-th delay is min(max, initial * multiplier^n), of which a `jitter`
// fraction is randomised: delay * (1 - jitter * u) with u uniform in [0, 1)
// drawn from the injected source, so many workers that lost the same server
// do not all reconnect at the same instant. Tests inject a fixed source.
//
// Thread safety: not synchronised; one owner.
#ifndef DROVER_NET_BACKOFF_H_
#define DROVER_NET_BACKOFF_H_

#include <functional>

#include "common/time.h"

namespace drover::net {

struct BackoffOptions {
  Duration initial = Millis(200);
  Duration max = Seconds(30);
  double multiplier = 2.0;
  double jitter = 0.5;  // 0 = none, 1 = anywhere in (0, delay]
};

class Backoff {
 public:
  // `uniform01` returns values in [0, 1); pass e.g. a lambda around
  // std::mt19937 seeded from std::random_device.
  Backoff(BackoffOptions options, std::function<double()> uniform01);

  // The delay to wait before the next attempt; grows with each call.
  Duration Next();

  // Back to `initial`, after a connection has succeeded.
  void Reset();

  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::function<double()> uniform01_;
  Duration base_;
  int attempts_ = 0;
};

}  // namespace drover::net

#endif  // DROVER_NET_BACKOFF_H_
