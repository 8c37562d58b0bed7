// Test helpers shared by the RedisStore tests: a unique key prefix per
// store under test, and synchronous wrappers that run an EventLoop (from the
// test thread, tests/redis/loop_runner.h) until a call's callback has run.
#ifndef DROVER_STORE_REDIS_STORE_TEST_UTIL_H_
#define DROVER_STORE_REDIS_STORE_TEST_UTIL_H_

#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "net/event_loop.h"
#include "store/redis_store.h"
#include "tests/redis/loop_runner.h"

namespace drover::store::testing {

// Generous: only a broken store waits this long.
inline constexpr Duration kWait = Seconds(20);

// "drover-test-<pid>-<n>:", so tests sharing one Redis never see each other.
inline std::string UniquePrefix() {
  static int n = 0;
  return "drover-test-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ":";
}

// Runs `call(callback)` and the loop until the callback ran; nullopt if it
// did not within kWait.
template <typename T, typename Call>
std::optional<T> AwaitOn(net::EventLoop& loop, Call call) {
  std::optional<T> out;
  call([&out](T value) { out.emplace(std::move(value)); });
  drover::testing::RunLoopUntil(loop, [&out] { return out.has_value(); }, kWait);
  return out;
}

// Creates and starts a store; the Status of Start, or the store.
inline Result<std::unique_ptr<RedisStore>> StartStore(net::EventLoop& loop,
                                                      RedisStoreOptions options) {
  ASSIGN_OR_RETURN(auto store, RedisStore::Create(loop, std::move(options)));
  auto started = AwaitOn<Status>(loop, [&](auto done) { store->Start(done); });
  if (!started) return Status(StatusCode::kDeadlineExceeded, "Start never completed");
  RETURN_IF_ERROR(*started);
  return store;
}

}  // namespace drover::store::testing

#endif  // DROVER_STORE_REDIS_STORE_TEST_UTIL_H_
