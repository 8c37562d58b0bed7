// Time values and the Clock interface.
//
// Drover passes time around as data: the scheduling core never reads a clock,
// it receives `Time now` with every event. Shells read a Clock; tests use
// SimulatedClock, which moves only when the test moves it.
//
// Time is microseconds since the Unix epoch (wall time, so it can be
// journaled and shown to people). Duration is std::chrono::microseconds.
//
// Thread safety: RealClock, Stopwatch and Deadline are safe from any
// thread; SimulatedClock is not synchronised and belongs to one test thread.
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
  // A reading that never goes back, from an arbitrary start: for intervals
  // that decide something (a worker's silence), which a step of the wall
  // clock must not stretch or cut.
  virtual Duration Monotonic() const = 0;
};

// The system wall clock, and the steady clock for Monotonic.
class RealClock final : public Clock {
 public:
  Time Now() const override;
  Duration Monotonic() const override;
};

// The process's RealClock, for the shells' entry points (main, a CLI
// command) to hand down. Every other file reads the Clock it was given:
// the `clock_reads` test keeps direct reads of the system clocks in this
// file's implementation alone.
Clock& SystemClock();

// A clock that starts at `start` and moves only through Advance/Set; its
// Monotonic reading is its Now.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(Time start = TimeFromMicros(1'000'000'000'000'000)) : now_(start) {}
  Time Now() const override { return now_; }
  Duration Monotonic() const override { return now_.time_since_epoch(); }
  void Advance(Duration d) { now_ += d; }
  void Set(Time t) { now_ = t; }

 private:
  Time now_;
};

// Elapsed time on the steady clock, for what only measures: a timing in a
// log line or a metric, a slice of the loop's time. Nothing it reads
// decides the state of a task, a worker or a lease.
class Stopwatch {
 public:
  Stopwatch();
  Duration Elapsed() const;
  double ElapsedSeconds() const;

 private:
  int64_t start_ns_;
};

// A bound on a blocking wait (poll, a retried flock or freeze) on the
// steady clock.
class Deadline {
 public:
  explicit Deadline(Duration in);
  // Time left, never negative.
  Duration Left() const;
  bool Passed() const;

 private:
  int64_t end_ns_;
};

}  // namespace drover

#endif  // DROVER_COMMON_TIME_H_
