// Time values and the Clock interface.
//
// Drover passes time around as data: the scheduling core never reads a clock,
// it receives `Time now` with every event. Shells read a Clock; tests use
// SimulatedClock, which moves only when the test moves it.
//
// Time is microseconds since the Unix epoch (wall time, so it can be
// journaled and shown to people). Duration is std::chrono::microseconds.
//
// Thread safety: RealClock is safe from any thread; SimulatedClock is not
// synchronised and belongs to one test thread.
#ifndef DROVER_COMMON_TIME_H_
#define DROVER_COMMON_TIME_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace drover {

using Duration = std::chrono::microseconds;
using Time = std::chrono::time_point<std::chrono::system_clock, Duration>;

constexpr Duration Micros(int64_t n) { return Duration(n); }
constexpr Duration Millis(int64_t n) { return Duration(n * 1000); }
constexpr Duration Seconds(int64_t n) { return Duration(n * 1000000); }

// A Time from a raw microsecond count, and back; used by codecs.
constexpr Time TimeFromMicros(int64_t us) { return Time(Duration(us)); }
constexpr int64_t ToMicros(Time t) { return t.time_since_epoch().count(); }

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

// The system wall clock.
class RealClock final : public Clock {
 public:
  Time Now() const override;
};

// A clock that starts at `start` and moves only through Advance/Set.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(Time start = TimeFromMicros(1'000'000'000'000'000)) : now_(start) {}
  Time Now() const override { return now_; }
  void Advance(Duration d) { now_ += d; }
  void Set(Time t) { now_ = t; }

 private:
  Time now_;
};

}  // namespace drover

#endif  // DROVER_COMMON_TIME_H_
