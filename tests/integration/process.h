// Process: a real child process for the integration tests (the drover
// binary as server, worker or client), with stdout and stderr merged into
// one pipe that the test reads with deadlines, never with sleeps.
//
// The destructor kills (SIGKILL) and reaps a child still running, so a
// failing test leaves nothing behind.
//
// Thread safety: one thread per Process.
#ifndef DROVER_TESTS_INTEGRATION_PROCESS_H_
#define DROVER_TESTS_INTEGRATION_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace drover::testing {

using Deadline = std::chrono::steady_clock::time_point;
inline Deadline In(std::chrono::milliseconds d) { return std::chrono::steady_clock::now() + d; }

class Process {
 public:
  // Starts argv[0] (a path) with `env` ("K=V") added to this environment.
  // Aborts the test (ADD_FAILURE + empty process) if it cannot start.
  Process(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Reads output until a line containing `needle` arrives; returns that
  // line, or nullopt at the deadline or when the output ends.
  std::optional<std::string> WaitForLine(const std::string& needle, Deadline deadline);

  // Sends a signal.
  void Signal(int signo);

  // Reads the rest of the output and waits for the exit; the exit status
  // (128 + signal when killed), or nullopt at the deadline.
  std::optional<int> Wait(Deadline deadline);

  // Everything read so far, for failure messages.
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  // Reads what is available until the deadline; false at EOF or deadline.
  bool ReadMore(Deadline deadline);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int pidfd_ = -1;
  bool eof_ = false;
  std::optional<int> status_;
  std::string output_;
  size_t scanned_ = 0;  // output_ before this offset has been matched line by line
};

// Runs to the end and returns {exit status, output}; status -1 on timeout.
struct RunResult {
  int status = -1;
  std::string output;
};
RunResult RunToEnd(std::vector<std::string> argv, Deadline deadline,
                   std::vector<std::string> env = {});

}  // namespace drover::testing

#endif  // DROVER_TESTS_INTEGRATION_PROCESS_H_
