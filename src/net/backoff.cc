#include "net/backoff.h"

#include <algorithm>

namespace drover::net {

Backoff::Backoff(BackoffOptions options, std::function<double()> uniform01)
    : options_(options), uniform01_(std::move(uniform01)), base_(options.initial) {}

Duration Backoff::Next() {
  const Duration base = std::min(base_, options_.max);
  double u = std::clamp(uniform01_(), 0.0, 1.0);
  double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  auto delay = Duration(static_cast<int64_t>(static_cast<double>(base.count()) * (1.0 - jitter * u)));
  delay = std::max(delay, Micros(1));
  auto grown = static_cast<double>(base_.count()) * std::max(options_.multiplier, 1.0);
  base_ = std::min(options_.max, Duration(static_cast<int64_t>(grown)));
  ++attempts_;
  return delay;
}

void Backoff::Reset() {
  base_ = options_.initial;
  attempts_ = 0;
}

}  // namespace drover::net
