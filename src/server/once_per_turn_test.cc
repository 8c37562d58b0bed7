#include "server/once_per_turn.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/event_loop.h"

namespace drover::server {
namespace {

// Two messages handled back to back (as a worker's Finished and Started
// are): a kNextTurn flush runs between them, a kWhenIdle flush once after
// both, so their journal records share one fsync.
TEST(OncePerTurnTest, WhenIdleWaitsForTheRestOfTheBurst) {
  for (OncePerTurn::When when : {OncePerTurn::kNextTurn, OncePerTurn::kWhenIdle}) {
    net::EventLoop loop;
    std::vector<std::string> order;
    OncePerTurn* flush_ptr = nullptr;
    OncePerTurn flush(
        loop,
        [&] {
          flush_ptr->Clear();
          order.push_back("flush");
        },
        when);
    flush_ptr = &flush;
    loop.Post([&] {
      order.push_back("finished");
      flush.Request();
      // The next message's handler is queued by the first one's (a read
      // completed from data already buffered).
      loop.Post([&] {
        order.push_back("started");
        flush.Request();
        loop.Post([&] { net::PostWhenIdle(loop, [&] { loop.Stop(); }); });
      });
    });
    loop.Run();
    if (when == OncePerTurn::kNextTurn) {
      EXPECT_EQ(order, (std::vector<std::string>{"finished", "flush", "started", "flush"}));
    } else {
      EXPECT_EQ(order, (std::vector<std::string>{"finished", "started", "flush"}));
    }
  }
}

}  // namespace
}  // namespace drover::server
