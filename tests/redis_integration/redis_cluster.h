// Helpers shared by the Redis integration tests: a private redis-server and
// the short-timing server flags. Tasks that record each run, `drover submit`
// argument lists and waits on the event stream are in
// tests/integration/cluster.h, shared with the embedded-store tests.
//
// Thread safety: the test's thread.
#ifndef DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_
#define DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/integration/cluster.h"
#include "tests/redis/redis_server.h"

namespace drover::testing {

inline std::unique_ptr<TestRedisServer> StartRedis(std::vector<std::string> args = {}) {
  auto server = TestRedisServer::Start(std::move(args));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

// Short timing: task leases of `ttl` (the leader lease a third of it).
inline std::vector<std::string> RedisFlags(const TestRedisServer& redis,
                                           std::vector<std::string> more = {},
                                           const std::string& ttl = "6s") {
  std::vector<std::string> flags = {"--redis", redis.url(),   "--heartbeat",
                                    "200ms",   "--lease-ttl", ttl};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

}  // namespace drover::testing

#endif  // DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_
