// Helpers for the executor's tests: a temporary directory, file reading and
// a harness that runs tasks on a real EpollLoop and collects their results.
#ifndef DROVER_WORKER_EXEC_EXEC_TEST_UTIL_H_
#define DROVER_WORKER_EXEC_EXEC_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "worker/exec/event_loop.h"
#include "worker/exec/executor.h"
#include "worker/exec/isolator.h"

namespace drover::worker::testing {

inline const char* Helper() { return DROVER_EXEC_TEST_HELPER; }

// A fresh directory under /tmp, world-traversable (tasks may run as
// another user), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/drover-exec-test-XXXXXX";
    path_ = mkdtemp(tmpl);
    chmod(path_.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A named pipe a task writes to when it reaches a point the test must wait
// for (a pid, "ready"); Read waits for it with a generous timeout.
class Fifo {
 public:
  Fifo() {
    path_ = dir_.path() + "/fifo";
    mkfifo(path_.c_str(), 0666);
    fd_ = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  ~Fifo() { close(fd_); }
  const std::string& path() const { return path_; }
  // The first chunk written; "" after 30 s without a writer.
  std::string Read() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) return "";
    char buf[256];
    ssize_t n = read(fd_, buf, sizeof buf);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  TempDir dir_;
  std::string path_;
  int fd_;
};

// Writes `text` to `path`, replacing it (a test's fake /proc or cgroup file).
inline void Put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline TaskSpec Task(uint32_t index, std::vector<std::string> argv) {
  TaskSpec spec;
  spec.id = TaskId{7, index};
  spec.argv = std::move(argv);
  return spec;
}

// Waits (30 s at most) until the process PrepareStart made for `id` has
// done its setup; false if there is none.
inline bool WaitParked(Executor& e, TaskId id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::optional<Executor::ParkedInfo> p = e.ParkedProcessOf(id);
    if (!p) return false;
    if (p->waiting) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();
  }
}

// An executor on its own loop; Run() starts a task and waits for its end.
class Harness {
 public:
  explicit Harness(std::unique_ptr<Isolator> isolator, ExecutorOptions options = {}) {
    loop_ = std::move(EpollLoop::Create()).value();
    if (options.workdir.empty()) options.workdir = dir_.path() + "/work";
    if (options.task_user.empty() && !options.per_user) options.run_as_root = true;
    auto e = Executor::Create(options, loop_.get(), std::move(isolator));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (e.ok()) executor_ = std::move(e).value();
  }

  // Starts the task; its result lands in results()[index] when it ends.
  Result<pid_t> Start(const TaskSpec& spec) {
    return executor_->Start(spec, [this](const TaskResult& r) { results_[r.id.index] = r; });
  }
  // Runs the loop until `n` results are in (60 s guard).
  void WaitFor(size_t n) {
    Status s = loop_->RunUntil([&] { return results_.size() >= n; }, Seconds(60));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  TaskResult Run(const TaskSpec& spec) {
    results_.erase(spec.id.index);
    auto pid = Start(spec);
    EXPECT_TRUE(pid.ok()) << pid.status().ToString();
    if (!pid.ok()) return {};
    Status s = loop_->RunUntil([&] { return results_.count(spec.id.index) > 0; }, Seconds(60));
    EXPECT_TRUE(s.ok()) << s.ToString();
    return results_[spec.id.index];
  }

  Executor& executor() { return *executor_; }
  EpollLoop& loop() { return *loop_; }
  std::map<uint32_t, TaskResult>& results() { return results_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::unique_ptr<EpollLoop> loop_;
  std::unique_ptr<Executor> executor_;
  std::map<uint32_t, TaskResult> results_;
};

// The facts of a result in one line, for a failed assertion's message (the
// executor words no reasons: the core does).
inline std::string Describe(const TaskResult& r) {
  return "exit code " + std::to_string(r.exit_code) + ", signal " + std::to_string(r.signal) +
         (r.oom_killed ? ", OOM-killed" : "") +
         (r.start_error.empty() ? "" : ", start error: " + r.start_error) +
         (r.disk_error.empty() ? "" : ", disk: " + r.disk_error);
}

}  // namespace drover::worker::testing

#endif  // DROVER_WORKER_EXEC_EXEC_TEST_UTIL_H_
