// Helpers shared by the Redis integration tests: a private redis-server, the
// short-timing server flags, tasks that record each run in a side file,
// `drover submit` argument lists, and waits on the event stream.
//
// Thread safety: the test's thread.
#ifndef DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_
#define DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_

#include <gtest/gtest.h>

#include <memory>
#include <set>
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

// Tasks that record each run and then hold until `go` exists.
inline std::vector<std::string> HoldingTask(const std::string& runs, const std::string& go) {
  return {
      "sh", "-c",
      "echo run >> " + runs + "$DROVER_TASK_INDEX; while [ ! -e " + go + " ]; do sleep 0.05; done"};
}

inline std::vector<std::string> Submit(std::vector<std::string> flags,
                                       std::vector<std::string> cmd) {
  std::vector<std::string> argv = {"submit"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

inline bool CountRunning(EventTap& tap, size_t n) {
  return tap.WaitFor([n](const std::vector<cli::TaskEventView>& events) {
    std::set<std::string> running;
    for (const auto& e : events) {
      if (e.to == "running") running.insert(e.task);
    }
    return running.size() >= n;
  });
}

}  // namespace drover::testing

#endif  // DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLUSTER_H_
