#include "tests/redis/loop_runner.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

#include "net/event_loop_asio.h"

namespace drover::testing {

bool RunLoopUntil(net::EventLoop& loop, const std::function<bool()>& done, Duration timeout) {
  auto& io = net::IoContextOf(loop);
  if (io.stopped()) io.restart();
  // Keeps run_one_until waiting when no operation is pending.
  auto guard = boost::asio::make_work_guard(io);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_until(deadline);
    if (io.stopped()) io.restart();
  }
  return done();
}

void RunLoopFor(net::EventLoop& loop, Duration d) {
  RunLoopUntil(loop, [] { return false; }, d);
}

}  // namespace drover::testing
