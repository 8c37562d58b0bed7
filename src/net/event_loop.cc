#include "net/event_loop.h"

#include <poll.h>

#include <cerrno>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "net/event_loop_asio.h"
#include "net/idle.h"

namespace drover::net {

namespace asio = boost::asio;

struct EventLoop::Impl {
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::function<void()>> idle;  // PostWhenIdle, in order
  // Virtual time: the clock, and the armed timers by (deadline, arm order).
  SimulatedClock* sim = nullptr;
  std::map<std::pair<Time, uint64_t>, std::function<void()>> timers;
  uint64_t timer_seq = 0;
};

asio::io_context& IoContextOf(EventLoop& loop) { return loop.impl().io; }

EventLoop::EventLoop() : impl_(std::make_unique<Impl>()) {}

EventLoop::EventLoop(SimulatedClock& clock) : impl_(std::make_unique<Impl>()) {
  impl_->sim = &clock;
}

EventLoop::~EventLoop() = default;

namespace {

// Runs what PostWhenIdle queued; returns how many ran.
size_t RunIdle(EventLoop::Impl& impl) {
  std::vector<std::function<void()>> idle = std::move(impl.idle);
  impl.idle.clear();
  for (auto& fn : idle) fn();
  return idle.size();
}

// Runs what is ready (at most kMaxBeforeIdle callbacks; poll_one also asks
// epoll, without waiting, for fds that became ready), then the idle
// callbacks, unless the loop was stopped meanwhile.
void RunReadyThenIdle(EventLoop::Impl& impl) {
  asio::io_context& io = impl.io;
  for (int i = 0; i < kMaxBeforeIdle && !io.stopped() && io.poll_one() > 0; ++i) {
  }
  if (!io.stopped()) RunIdle(impl);
}

// Runs what is ready now (posted callbacks, I/O that epoll reports ready,
// idle callbacks) without blocking; returns how many ran. Stops early once
// the loop is stopped.
size_t PollReady(EventLoop::Impl& impl) {
  asio::io_context& io = impl.io;
  size_t n = io.poll();
  while (!io.stopped() && !impl.idle.empty()) {
    n += RunIdle(impl);
    n += io.poll();
  }
  return n;
}

// Virtual time: fires the earliest timer if it is due by `limit` (none:
// any), moving the clock to its deadline. False when there is none.
bool FireNextTimer(EventLoop::Impl& impl, std::optional<Time> limit) {
  if (impl.timers.empty()) return false;
  auto it = impl.timers.begin();
  const Time at = it->first.first;
  if (limit && at > *limit) return false;
  if (at > impl.sim->Now()) impl.sim->Set(at);
  std::function<void()> fn = std::move(it->second);
  impl.timers.erase(it);
  fn();
  return true;
}

}  // namespace

void EventLoop::Run() {
  if (impl_->sim != nullptr && !impl_->io.stopped()) {
    // Discrete events: what is ready runs; when nothing is, the clock jumps
    // to the next timer; with no timer left, the loop waits for I/O.
    asio::io_context& io = impl_->io;
    impl_->work.emplace(asio::make_work_guard(io));
    while (!io.stopped()) {
      if (PollReady(*impl_) > 0 || io.stopped()) continue;
      if (FireNextTimer(*impl_, std::nullopt)) continue;
      if (io.run_one() > 0 && !impl_->idle.empty()) RunReadyThenIdle(*impl_);
    }
    impl_->work.reset();
    io.restart();
    return;
  }
  if (impl_->io.stopped()) {
    // A Stop() before Run() wins once, then the loop becomes usable again.
    impl_->io.restart();
    return;
  }
  impl_->work.emplace(asio::make_work_guard(impl_->io));
  // Idle callbacks left by a Stop() run soon after a new Run() starts.
  if (!impl_->idle.empty()) asio::post(impl_->io, [] {});
  // One callback at a time (run_one blocks for it), so that idle callbacks
  // get their turn once nothing else is ready.
  while (impl_->io.run_one() > 0) {
    if (!impl_->idle.empty()) RunReadyThenIdle(*impl_);
  }
  impl_->work.reset();
  impl_->io.restart();
}

size_t EventLoop::Poll() {
  size_t n = impl_->io.poll();
  while (!impl_->idle.empty()) {
    // poll() stops the io_context when it runs out of work.
    if (impl_->io.stopped()) impl_->io.restart();
    n += RunIdle(*impl_);
    n += impl_->io.poll();
  }
  if (impl_->io.stopped()) impl_->io.restart();
  return n;
}

void PostWhenIdle(EventLoop& loop, std::function<void()> fn) {
  EventLoop::Impl& impl = loop.impl();
  // Queued idle work counts as work: the loop must not block or stop
  // before it ran.
  if (impl.idle.empty()) asio::post(impl.io, [] {});
  impl.idle.push_back(std::move(fn));
}

size_t RunOneFor(EventLoop& loop, Duration timeout) {
  EventLoop::Impl& impl = loop.impl();
  asio::io_context& io = impl.io;
  if (io.stopped()) io.restart();
  // Keeps run_one_for waiting when no operation is pending.
  auto guard = asio::make_work_guard(io);
  // Idle callbacks already waiting do not wait for the timeout.
  if (!impl.idle.empty()) asio::post(io, [] {});
  size_t n = io.run_one_for(timeout);
  if (!impl.idle.empty()) RunReadyThenIdle(impl);
  if (io.stopped()) io.restart();
  return n;
}

void EventLoop::Stop() { impl_->io.stop(); }

Clock& EventLoop::clock() const {
  if (impl_->sim != nullptr) return *impl_->sim;
  return SystemClock();
}

bool EventLoop::virtual_time() const { return impl_->sim != nullptr; }

size_t EventLoop::AdvanceTo(Time until) {
  size_t n = Poll();
  while (FireNextTimer(*impl_, until)) n += 1 + Poll();
  if (impl_->sim->Now() < until) impl_->sim->Set(until);
  return n + Poll();
}

size_t EventLoop::AdvanceBy(Duration d) { return AdvanceTo(impl_->sim->Now() + d); }

bool EventLoop::RunUntil(const std::function<bool()>& done, Time limit, Duration settle) {
  for (;;) {
    Poll();
    if (done()) return true;
    // Work in flight (I/O, another thread's Post) lands before time moves.
    if (RunOneFor(*this, settle) > 0) continue;
    if (done()) return true;
    if (!FireNextTimer(*impl_, limit)) {
      if (impl_->sim->Now() < limit) impl_->sim->Set(limit);
      Poll();
      return done();
    }
  }
}

std::optional<Time> EventLoop::NextTimer() const {
  if (impl_->timers.empty()) return std::nullopt;
  return impl_->timers.begin()->first.first;
}

void EventLoop::Post(std::function<void()> fn) { asio::post(impl_->io, std::move(fn)); }

bool EventLoop::InLoopThread() const { return impl_->io.get_executor().running_in_this_thread(); }

// Timer: the generation counter makes Cancel() final even when the timer
// already expired and its completion is queued but not yet run.
struct Timer::State {
  explicit State(EventLoop::Impl& i) : impl(i), timer(i.io) {}
  EventLoop::Impl& impl;
  asio::steady_timer timer;
  uint64_t generation = 0;
  bool armed = false;
  // Virtual time: its entry in the loop's timers while armed.
  std::optional<std::pair<Time, uint64_t>> key;
};

Timer::Timer(EventLoop& loop) : state_(std::make_shared<State>(loop.impl())) {}

Timer::~Timer() { Cancel(); }

void Timer::ArmAfter(Duration delay, std::function<void()> fn) {
  Cancel();
  if (delay < Duration::zero()) delay = Duration::zero();
  State& s = *state_;
  s.armed = true;
  uint64_t gen = s.generation;
  std::weak_ptr<State> weak = state_;
  if (s.impl.sim != nullptr) {
    const std::pair<Time, uint64_t> key{s.impl.sim->Now() + delay, ++s.impl.timer_seq};
    s.key = key;
    s.impl.timers.emplace(key, [weak, gen, fn = std::move(fn)] {
      auto state = weak.lock();
      if (!state || state->generation != gen) return;
      state->key.reset();
      state->armed = false;
      fn();
    });
    return;
  }
  s.timer.expires_after(delay);
  s.timer.async_wait([weak, gen, fn = std::move(fn)](const boost::system::error_code& ec) {
    auto state = weak.lock();
    if (ec || !state || state->generation != gen) return;
    state->armed = false;
    fn();
  });
}

void Timer::ArmAt(Time when, std::function<void()> fn) {
  const Clock& clock =
      state_->impl.sim != nullptr ? static_cast<const Clock&>(*state_->impl.sim) : SystemClock();
  ArmAfter(when - clock.Now(), std::move(fn));
}

void Timer::Cancel() {
  ++state_->generation;
  state_->armed = false;
  if (state_->key) {
    state_->impl.timers.erase(*state_->key);
    state_->key.reset();
  }
  state_->timer.cancel();
}

bool Timer::armed() const { return state_->armed; }

namespace {

bool ReadableNow(int fd) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n != 0;  // an error counts: the callback finds out
}

}  // namespace

struct FdWatch::State {
  State(asio::io_context& io, int fd) : desc(io) {
    boost::system::error_code ec;
    desc.assign(fd, ec);
    if (ec) status = Internal("cannot watch fd " + std::to_string(fd) + ": " + ec.message());
  }
  asio::posix::stream_descriptor desc;
  std::function<void()> on_readable;
  bool stopped = false;
  Status status;
};

FdWatch::FdWatch(EventLoop& loop, int fd, std::function<void()> on_readable)
    : state_(std::make_shared<State>(IoContextOf(loop), fd)) {
  state_->on_readable = std::move(on_readable);
  if (state_->status.ok()) Arm(state_);
}

FdWatch::~FdWatch() {
  state_->stopped = true;
  boost::system::error_code ec;
  state_->desc.cancel(ec);
  // The caller owns the fd: release it so the descriptor does not close it.
  if (state_->desc.is_open()) state_->desc.release();
}

const Status& FdWatch::status() const { return state_->status; }

void FdWatch::Arm(const std::shared_ptr<State>& state) {
  std::weak_ptr<FdWatch::State> weak = state;
  state->desc.async_wait(asio::posix::stream_descriptor::wait_read,
                         [weak](const boost::system::error_code& ec) {
                           auto s = weak.lock();
                           if (!s || s->stopped || ec) return;
                           // asio gives the state of an fd unwatched while a
                           // batch of events is handled to the next fd
                           // watched, and a later event of that batch for the
                           // old fd then lands here: only real readiness
                           // counts (a pidfd taken for an exited child would
                           // get the task killed).
                           if (!ReadableNow(s->desc.native_handle())) return Arm(s);
                           s->on_readable();
                           if (!s->stopped) Arm(s);
                         });
}

}  // namespace drover::net
