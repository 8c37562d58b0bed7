// Cluster: real `drover` processes for one integration test — a server on
// 127.0.0.1 with a free port (--port 0, read back from its readiness line),
// workers, and client commands — all in a temporary directory with their own
// access file, removed at the end. Waiting is done on output lines and on
// the server's event stream (EventTap), never on sleeps.
//
// Thread safety: the test's thread, except EventTap's internals.
#ifndef DROVER_TESTS_INTEGRATION_CLUSTER_H_
#define DROVER_TESTS_INTEGRATION_CLUSTER_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/job_watch.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/ws_session.h"
#include "process.h"

namespace drover::testing {

inline constexpr std::chrono::seconds kStartTimeout(30);
inline constexpr std::chrono::seconds kJobTimeout(90);

class Cluster {
 public:
  // `server_flags` are added to `drover server` (e.g. --heartbeat).
  explicit Cluster(std::vector<std::string> server_flags = {});
  ~Cluster();

  const std::string& dir() const { return dir_; }
  std::string access_file() const { return dir_ + "/access.json"; }
  uint16_t port() const { return port_; }

  // Starts the server (again, on the same state dir and, after the first
  // time, the same port) and waits for its readiness line. Returns that
  // process; its output holds what it printed at start.
  // `env` ("K=V") is added to the server's environment.
  Process& StartServer(std::vector<std::string> env = {});
  Process* server() { return server_.get(); }
  void KillServer(int signo);  // and reap it

  // Starts `drover worker --name NAME` with `extra` flags (and `env`,
  // "K=V", added to its environment) and waits for the line saying it
  // attached to the server.
  Process& StartWorker(const std::string& name, std::vector<std::string> extra = {},
                       std::vector<std::string> env = {});

  // Runs a client command (`drover ARGS` with DROVER_ACCESS naming this
  // cluster's access file).
  RunResult Drover(std::vector<std::string> args, std::chrono::seconds timeout = kJobTimeout);

  // REST through the CLI's client library.
  cli::ApiClient Api();
  nlohmann::json Get(const std::string& target);

  // Writes `text` to the file `name` in dir() (a job file, say); returns its
  // path.
  std::string WriteFile(const std::string& name, const std::string& text) const;

  std::string binary() const;

 private:
  std::string dir_;
  std::vector<std::string> server_flags_;
  uint16_t port_ = 0;
  std::unique_ptr<Process> server_;
  std::vector<std::unique_ptr<Process>> workers_;
};

// A subscriber to /api/v1/events?job=N on its own EventLoop thread; the test
// waits until the events seen satisfy a predicate.
class EventTap {
 public:
  EventTap(const net::ClientOptions& options, uint64_t job);
  ~EventTap();

  // Waits until `pred(events so far)` holds; false at the timeout.
  bool WaitFor(const std::function<bool(const std::vector<cli::TaskEventView>&)>& pred,
               std::chrono::seconds timeout = kJobTimeout);

  // Convenience: a task reached `state` (with this attempt, when non-zero).
  bool WaitForState(const std::string& task, const std::string& state, uint32_t attempt = 0);
  // Convenience: `n` different tasks reached `state`.
  bool WaitForTasksIn(const std::string& state, size_t n);

 private:
  net::EventLoop loop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<cli::TaskEventView> events_;
  std::shared_ptr<net::WsSession> session_;
  std::thread thread_;
};

// The job id a `drover submit` printed (its only stdout line), checking
// that it exited 0; 0 when there is none.
uint64_t SubmittedJob(const RunResult& r);

// The job id in what `drover run` printed ("job 12 \"name\" ..."); 0 when
// there is none.
uint64_t RunJobId(const std::string& output);

// Submits the job `spec` through the API (POST /api/v1/jobs); its id, or 0
// (and a test failure) when refused.
uint64_t Post(Cluster& c, const nlohmann::json& spec);

// The argument list of `drover submit FLAGS -- CMD`.
std::vector<std::string> Submit(std::vector<std::string> flags, std::vector<std::string> cmd);

// A task command that records each run (a line "run" appended to the file
// `runs` followed by its array index) and then runs the shell text `then`.
std::vector<std::string> RecordingTask(const std::string& runs, const std::string& then);
// A RecordingTask that then holds until the file `go` exists.
std::vector<std::string> HoldingTask(const std::string& runs, const std::string& go);

// Checks that job `job` has `tasks` tasks and that each succeeded in its
// first attempt and ran exactly once, as HoldingTask(runs, ...) recorded:
// what a server restart must give (re-attached or adopted, not re-run).
void ExpectEachTaskRanOnceInAttempt1(Cluster& c, uint64_t job, const std::string& runs,
                                     size_t tasks);

// The jobs of a server-restart scenario, on a worker "solo" with one core:
// "hold", three HoldingTasks (one runs, two queue), and "later", after it.
struct HeldJobs {
  uint64_t hold = 0;
  uint64_t later = 0;
  std::string go;    // the file that lets hold's tasks end
  std::string runs;  // HoldingTask's record of runs
};
// Starts the worker, submits both jobs and waits until one of hold's tasks
// runs. Use as ASSERT_NO_FATAL_FAILURE(StartHeldJobs(c, &jobs)).
void StartHeldJobs(Cluster& c, HeldJobs* jobs);
// After the restart: checks that both jobs came back, lets hold's tasks
// end, waits for later and checks that each task ran once, in attempt 1.
void FinishHeldJobs(Cluster& c, const HeldJobs& jobs);

// Waits until `path` exists (made by a rename into `dir`), on inotify.
bool WaitForFile(const std::string& dir, const std::string& path, Deadline deadline);

// The lines of a file (a task's side file), without line ends.
std::vector<std::string> Lines(const std::string& path);

// Kills (SIGKILL) the pids a test's tasks recorded in `path`, one per line
// (the orphans of a killed worker).
void KillRecorded(const std::string& path);

// Worker options for tests that lose a worker: heartbeat 200 ms and lease
// TTL 2 s, so the loss is noticed within seconds.
inline const std::vector<std::string> kFastLoss = {"--heartbeat", "200ms", "--lease-ttl", "2s"};

}  // namespace drover::testing

#endif  // DROVER_TESTS_INTEGRATION_CLUSTER_H_
