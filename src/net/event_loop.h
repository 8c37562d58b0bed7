// EventLoop: one asio io_context driven by one thread, the heart of every
// Drover shell. The server shell, the worker agent and the WebSocket client
// all run their callbacks on it, so their state needs no locks.
//
//   EventLoop loop;
//   Timer tick(loop);
//   tick.ArmAfter(Seconds(2), [&] { ... });
//   FdWatch pidfd(loop, fd, [&] { ... });    // fd became readable
//   loop.Run();                              // until loop.Stop()
//
// Virtual time, for tests: EventLoop(SimulatedClock&) runs its timers on
// that clock instead of the steady clock. The clock moves only as the loop
// runs out of ready work: Run() then jumps it to the next timer's deadline
// (a discrete-event simulation), and AdvanceTo / RunUntil move it under the
// test's control. I/O still works as usual, in real time.
//
// Boost stays out of this header; other files of src/net reach the
// io_context through event_loop_asio.h.
//
// Thread safety: Post() and Stop() are safe from any thread. Everything
// else (Timer, FdWatch, the callbacks) belongs to the loop thread, except
// that objects may be created before Run() starts on the thread that will
// call it.
#ifndef DROVER_NET_EVENT_LOOP_H_
#define DROVER_NET_EVENT_LOOP_H_

#include <functional>
#include <memory>
#include <optional>

#include "common/status.h"
#include "common/time.h"

namespace drover::net {

class EventLoop {
 public:
  EventLoop();
  // Timers on `clock`, which must outlive the loop (see above).
  explicit EventLoop(SimulatedClock& clock);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs callbacks on the calling thread until Stop(). Returns at once if
  // Stop() was called before; Run() may be called again after it returns.
  // An exception escaping a callback is a bug: it propagates out of Run().
  void Run();

  // Runs ready callbacks without blocking; returns how many ran. For tests
  // and shells that interleave the loop with other work.
  size_t Poll();

  // Makes Run() return soon; callbacks already queued stay queued.
  void Stop();

  // Queues `fn` to run on the loop thread, after callbacks already queued.
  void Post(std::function<void()> fn);

  // True while the calling thread is inside Run() / Poll() of this loop.
  bool InLoopThread() const;

  // The loop's clock: the SimulatedClock it was made with, else the system
  // clock. A shell on this loop reads time from it.
  Clock& clock() const;
  bool virtual_time() const;

  // Virtual time only. Runs what is ready, then each timer due at or before
  // `until` in deadline order (the clock set to each deadline as it fires,
  // and what it made ready run before the next), then sets the clock to
  // `until` and runs what is ready. Returns how many callbacks ran.
  size_t AdvanceTo(Time until);
  size_t AdvanceBy(Duration d);
  // Virtual time only. Runs ready work and fires timers in order, as Run()
  // does, until `done()` holds (true) or the next timer is past `limit`
  // (false, the clock set to `limit`). Between timers it waits up to
  // `settle` of real time for I/O or another thread's Post when nothing is
  // ready, so work in flight lands before time jumps.
  bool RunUntil(const std::function<bool()>& done, Time limit, Duration settle = Millis(2));
  // The earliest armed timer's deadline (virtual time only).
  std::optional<Time> NextTimer() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// A one-shot timer. Re-arming replaces the pending callback. Destroying the
// timer or calling Cancel() guarantees the callback will not run. Times are
// read from the steady clock (on a virtual-time loop, its clock); ArmAt
// converts a wall-clock Time into a delay from now (so a wall-clock jump
// after arming does not move the timer).
class Timer {
 public:
  explicit Timer(EventLoop& loop);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  void ArmAfter(Duration delay, std::function<void()> fn);
  void ArmAt(Time when, std::function<void()> fn);
  void Cancel();
  bool armed() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Calls `on_readable` on the loop thread each time `fd` is readable (or has
// hung up / errored, so a pidfd of an exited child and a pipe at EOF both
// report). The callback should read or close what is ready; the watch re-arms
// after each call. The fd is not owned: destroy the FdWatch before closing
// it. Destroying the watch (also from inside its own callback) guarantees no
// further calls. Timers and watches must be destroyed before their loop.
class FdWatch {
 public:
  FdWatch(EventLoop& loop, int fd, std::function<void()> on_readable);
  ~FdWatch();
  FdWatch(const FdWatch&) = delete;
  FdWatch& operator=(const FdWatch&) = delete;

  // Fails if the fd cannot be registered with epoll (e.g. a regular file);
  // then the callback is never called.
  const Status& status() const;

 private:
  struct State;
  static void Arm(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;
};

}  // namespace drover::net

#endif  // DROVER_NET_EVENT_LOOP_H_
