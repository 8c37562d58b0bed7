// RunProgram (run_program.h): a program run to its end, with a deadline.
#include "common/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/unique_fd.h"

extern char** environ;

namespace drover {
namespace {

constexpr size_t kMaxOutput = 1 << 20;

std::string_view TrimOutput(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string FirstLine(std::string_view text) {
  text = TrimOutput(text);
  return std::string(text.substr(0, text.find('\n')));
}

Status DeadlineExceeded(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}

Status SystemError(const char* what) {
  return Internal(std::string(what) + ": " + std::strerror(errno));
}

// A running child in its own process group; killed and reaped unless
// Wait() reaped it first.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  Result<int> Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) return SystemError("waitpid");
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

}  // namespace

bool ProgramRun::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string ProgramRun::How() const {
  return WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status));
}

std::string ProgramRun::FirstLine() const { return drover::FirstLine(out.empty() ? err : out); }

Result<std::string> RunProgram(const std::vector<std::string>& argv, Duration timeout) {
  ASSIGN_OR_RETURN(ProgramRun run, RunProgramToEnd(argv, timeout));
  if (run.ok()) return std::move(run.out);
  const std::string said = run.FirstLine();
  return FailedPrecondition(argv[0] + " " + run.How() + (said.empty() ? "" : ": " + said));
}

Result<ProgramRun> RunProgramToEnd(const std::vector<std::string>& argv, Duration timeout) {
  if (argv.empty()) return InvalidArgument("no program to run");
  const std::string& program = argv[0];
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return SystemError("pipe2");
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return SystemError("pipe2");
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.fd(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  // Its own process group, so a timeout kills whatever it started too.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, program.c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc == ENOENT) return NotFound(program + ": not found");
  if (rc == EACCES) return FailedPrecondition(program + ": not executable");
  if (rc != 0) return Internal("cannot start " + program + ": " + std::strerror(rc));
  Child child(pid);
  out_write.Reset();
  err_write.Reset();

  const Deadline deadline(timeout);
  std::string out;
  std::string err;
  bool out_open = true;
  bool err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
    if (left.count() <= 0) {
      return DeadlineExceeded(program + " did not finish within " +
                              std::to_string(timeout.count() / 1000) + " ms");
    }
    pollfd fds[2] = {{out_open ? out_read.fd() : -1, POLLIN, 0},
                     {err_open ? err_read.fd() : -1, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (n < 0 && errno != EINTR) return SystemError("poll");
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t got = read(fds[i].fd, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      (i == 0 ? out : err).append(buffer, static_cast<size_t>(got));
      if (out.size() + err.size() > kMaxOutput) {
        return ResourceExhausted(program + " wrote more than 1 MiB");
      }
    }
  }
  // Both pipes are closed. Wait for the exit under the same deadline; a
  // child that closed its output but lingers is killed by ~Child.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    UniqueFd owned(pidfd);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
      if (left.count() <= 0) {
        return DeadlineExceeded(program + " closed its output but did not exit in time");
      }
      pollfd fd = {pidfd, POLLIN, 0};
      int n = poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
      if (n > 0) break;
      if (n < 0 && errno != EINTR) return SystemError("poll");
    }
  }
  ASSIGN_OR_RETURN(int status, child.Wait());
  return ProgramRun{status, std::move(out), std::move(err)};
}

}  // namespace drover
