// TestRedisServer: a private redis-server for tests, on a free loopback
// port, with nothing persisted (`--save '' --appendonly no`, a temporary
// --dir). Start() returns once the server printed "Ready to accept
// connections"; the destructor kills it (also when a test failed), and the
// kernel kills it if the test process dies first (PR_SET_PDEATHSIG).
//
// SharedTestRedisUrl(): the server most tests share — DROVER_TEST_REDIS_URL
// when set (e.g. redis://127.0.0.1:6379/15), else one private server started
// on first use and kept until the process exits. Tests that kill, restart or
// reconfigure a server start their own.
//
// Thread safety: test-only; use from the test thread.
#ifndef DROVER_TESTS_REDIS_REDIS_SERVER_H_
#define DROVER_TESTS_REDIS_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace drover::testing {

class TestRedisServer {
 public:
  // Starts redis-server with `extra_args` appended to the defaults (e.g.
  // {"--rename-command", "CONFIG", ""}). kUnavailable when redis-server is
  // not installed or not ready within 20 s (the message holds its output).
  static Result<std::unique_ptr<TestRedisServer>> Start(std::vector<std::string> extra_args = {});

  ~TestRedisServer();
  TestRedisServer(const TestRedisServer&) = delete;
  TestRedisServer& operator=(const TestRedisServer&) = delete;

  // SIGKILL, then waits for the process to be gone (its sockets closed).
  void Kill();
  // Starts it again on the same port with the same arguments and data
  // directory: empty with the defaults, but what an AOF kept survives
  // (Start({"--appendonly", "yes", "--appendfsync", "always"})).
  Status Restart();

  int port() const { return port_; }
  // redis://127.0.0.1:<port>/<db>
  std::string url(int db = 0) const;

 private:
  TestRedisServer(std::string dir, std::vector<std::string> extra_args)
      : dir_(std::move(dir)), extra_args_(std::move(extra_args)) {}
  Status Launch();

  std::string dir_;
  std::vector<std::string> extra_args_;
  int port_ = 0;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread drain_;  // keeps reading its output so that it never blocks
};

Result<std::string> SharedTestRedisUrl();

// A loopback port nobody listens on right now (the kernel's pick for port
// 0; another process may take it before the caller binds it).
Result<int> FreePort();

}  // namespace drover::testing

#endif  // DROVER_TESTS_REDIS_REDIS_SERVER_H_
