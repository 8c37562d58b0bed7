#include "common/time.h"

#include <algorithm>

namespace drover {

namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Time RealClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

Duration RealClock::Monotonic() const { return Duration(SteadyNanos() / 1000); }

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

Stopwatch::Stopwatch() : start_ns_(SteadyNanos()) {}

Duration Stopwatch::Elapsed() const { return Duration((SteadyNanos() - start_ns_) / 1000); }

double Stopwatch::ElapsedSeconds() const {
  return static_cast<double>(SteadyNanos() - start_ns_) / 1e9;
}

Deadline::Deadline(Duration in)
    : end_ns_(SteadyNanos() + std::chrono::duration_cast<std::chrono::nanoseconds>(in).count()) {}

Duration Deadline::Left() const {
  return Duration(std::max<int64_t>(0, end_ns_ - SteadyNanos()) / 1000);
}

bool Deadline::Passed() const { return SteadyNanos() >= end_ns_; }

}  // namespace drover
