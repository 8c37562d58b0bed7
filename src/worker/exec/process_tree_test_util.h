// Helpers for the reaper's and the life record's tests: small process
// groups made with fork, a stand-in "worker" process that a test can kill,
// and waits on pidfds with deadlines (no sleeps).
#ifndef DROVER_WORKER_EXEC_PROCESS_TREE_TEST_UTIL_H_
#define DROVER_WORKER_EXEC_PROCESS_TREE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/life_record.h"

namespace drover::worker::testing {

// A process group like a task's: a leader in its own session running
// `sleep 1000` with one member (another sleep) in its group. The leader is
// a child of the caller; the member is the leader's child.
struct TaskGroup {
  pid_t leader = -1;
  pid_t member = -1;
};

inline TaskGroup StartTaskGroup() {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t leader = fork();
  if (leader == 0) {
    setsid();
    const pid_t member = fork();
    if (member == 0) {
      execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    (void)!write(fds[1], &member, sizeof member);
    execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  TaskGroup g;
  g.leader = leader;
  if (read(fds[0], &g.member, sizeof g.member) != sizeof g.member) g.member = -1;
  close(fds[0]);
  return g;
}

// Whether `pid` has ended (exited; a zombie counts) within `timeout`.
inline bool EndsWithin(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = PidfdOpen(pid);
  if (fd < 0) return true;  // gone already
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  close(fd);
  return r == 1;
}

// Still running right now.
inline bool Running(pid_t pid) { return !EndsWithin(pid, std::chrono::milliseconds(0)); }

// Kills and (when it is our child) reaps a process a test made.
inline void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);  // fails harmlessly for a grandchild
}

// A stand-in for a worker: a forked process that runs `body` (which may
// start a Reaper and tell it things; it returns the reaper's pid, or -1 on
// failure), reports back, then waits to be killed. The test ends it with
// Kill(), as a kill -9 would.
class FakeWorker {
 public:
  explicit FakeWorker(const std::function<pid_t()>& body) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      const pid_t reaper = body();
      (void)!write(fds[1], &reaper, sizeof reaper);
      for (;;) pause();
    }
    close(fds[1]);
    ready_ = read(fds[0], &reaper_, sizeof reaper_) == sizeof reaper_ && reaper_ > 0;
    close(fds[0]);
  }
  ~FakeWorker() { Kill(); }
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  pid_t reaper() const { return reaper_; }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  pid_t reaper_ = -1;
  bool ready_ = false;
};

}  // namespace drover::worker::testing

#endif  // DROVER_WORKER_EXEC_PROCESS_TREE_TEST_UTIL_H_
