// SimCluster: the server shell and N worker agents in one process, on one
// virtual-time event loop (net::EventLoop(SimulatedClock&)), joined by
// in-memory WebSockets (net::PipeSession) through the server's
// worker channel, with tasks run by FakeRunner. The core, the server shell
// (its store, journal, leases, retention, worker channel) and the agents'
// state machines and shells are the real ones; only processes, sockets and
// the wall clock are not. A scenario that spans a lease TTL, a fencing
// deadline or a week of retention runs in milliseconds, and runs the same
// way every time.
//
// Faults a test can play: Partition (the link breaks and stays down until
// Heal), Kill (the worker dies as under kill -9: no goodbye, its tasks gone
// with it), StartWorker again under the same name (a restart), and
// RestartServer (the server stops and starts again from its state
// directory; the workers reconnect).
//
// Thread safety: none; everything runs on the test's thread.
#ifndef DROVER_TESTS_SIM_CLUSTER_SIM_CLUSTER_H_
#define DROVER_TESTS_SIM_CLUSTER_SIM_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/queries.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "net/net_test_util.h"
#include "server/server_shell.h"
#include "worker/agent/agent.h"
#include "worker/agent/testing/fake_runner.h"

namespace drover::testing {

struct SimClusterOptions {
  int workers = 2;
  std::string cpus = "0-1";  // each worker's cores (in any machine's affinity mask)
  std::string mem = "4GiB";
  // Changes to the server's and each worker's configuration.
  std::function<void(server::ServerConfig&)> server;
  std::function<void(worker::AgentConfig&)> worker;
};

class SimCluster {
 public:
  explicit SimCluster(SimClusterOptions options = {});
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  SimulatedClock& clock() { return clock_; }
  net::EventLoop& loop() { return loop_; }
  server::ServerShell& server() { return *server_; }
  const core::Scheduler& scheduler();

  // Submits a job file's text (TOML), as `drover run` would.
  Result<JobId> Submit(std::string_view toml);
  std::optional<core::TaskInfo> Task(TaskId id);
  core::TaskState StateOf(TaskId id);

  // Runs the loop until `done` holds (true) or `limit` of simulated time
  // has passed (false).
  bool RunUntil(const std::function<bool()>& done, Duration limit);
  // Runs the loop for `d` of simulated time.
  void RunFor(Duration d);
  bool WaitForState(TaskId id, core::TaskState state, Duration limit);

  // Worker i (0-based; named "w0", "w1", ...): its fake runner, and whether
  // its agent runs.
  worker::testing::FakeRunner& runner(int i);
  bool alive(int i) const;
  // The worker i that runs `id` now (FakeRunner::Running), or -1.
  int RunningOn(TaskId id);
  // Ends task `id` on the worker that runs it: exit code, result.
  void Exit(TaskId id, int exit_code = 0, std::string result = "");

  void Partition(int i);    // its link breaks; reconnecting fails until Heal
  void Heal(int i);
  void Kill(int i);         // kill -9: link broken, agent gone, no goodbye
  void StartWorker(int i);  // (again) under its name, work directory and key
  void RestartServer();     // stop, then start from the same state directory

 private:
  struct Worker;
  class Link;
  void StartServer();

  SimClusterOptions options_;
  SimulatedClock clock_;
  net::EventLoop loop_{clock_};
  net::testing::TempDir dir_;
  std::unique_ptr<server::ServerShell> server_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace drover::testing

#endif  // DROVER_TESTS_SIM_CLUSTER_SIM_CLUSTER_H_
