#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <gtest/gtest.h>

extern char** environ;

namespace drover::testing {

namespace {

int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

Process::Process(std::vector<std::string> argv, std::vector<std::string> env) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  // `env` overrides: getenv() would find an inherited entry of the same name
  // first.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('=') + 1);
    bool overridden = false;
    for (const std::string& mine : env) overridden |= mine.starts_with(name);
    if (!overridden) env_strings.emplace_back(kv);
  }
  for (std::string& kv : env) env_strings.push_back(std::move(kv));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  const int rc = posix_spawn(&pid_, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  out_fd_ = pipe_fds[0];
  if (rc != 0) {
    ADD_FAILURE() << "spawn " << argv[0] << ": " << std::strerror(rc);
    pid_ = -1;
    eof_ = true;
    return;
  }
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (pidfd_ >= 0) close(pidfd_);
}

bool Process::ReadMore(Deadline deadline) {
  if (eof_) return false;
  pollfd p{out_fd_, POLLIN, 0};
  const int n = poll(&p, 1, MillisLeft(deadline));
  if (n <= 0) return false;
  char buf[4096];
  const ssize_t got = read(out_fd_, buf, sizeof buf);
  if (got <= 0) {
    eof_ = true;
    return false;
  }
  output_.append(buf, static_cast<size_t>(got));
  return true;
}

std::optional<std::string> Process::WaitForLine(const std::string& needle, Deadline deadline) {
  while (true) {
    size_t nl;
    while ((nl = output_.find('\n', scanned_)) != std::string::npos) {
      std::string line = output_.substr(scanned_, nl - scanned_);
      scanned_ = nl + 1;
      if (line.find(needle) != std::string::npos) return line;
    }
    if (!ReadMore(deadline)) return std::nullopt;
  }
}

void Process::Signal(int signo) {
  if (pid_ > 0 && !status_) kill(pid_, signo);
}

std::optional<int> Process::Wait(Deadline deadline) {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  while (ReadMore(deadline)) {
  }
  pollfd p{pidfd_, POLLIN, 0};
  if (poll(&p, 1, MillisLeft(deadline)) <= 0) return std::nullopt;
  int st = 0;
  if (waitpid(pid_, &st, 0) != pid_) return std::nullopt;
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return status_;
}

RunResult RunToEnd(std::vector<std::string> argv, Deadline deadline,
                   std::vector<std::string> env) {
  Process p(std::move(argv), std::move(env));
  std::optional<int> status = p.Wait(deadline);
  return RunResult{status.value_or(-1), p.output()};
}

}  // namespace drover::testing
