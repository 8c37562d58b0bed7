#include "worker/resources/nvidia_smi.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "common/quantity.h"

extern char** environ;

namespace drover::worker {
namespace {

constexpr size_t kMaxOutput = 1 << 20;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool NotAvailable(std::string_view field) {
  return field.starts_with('[') && field.ends_with(']');  // [N/A], [Not Supported]
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

std::string FirstLine(std::string_view text) {
  text = Trim(text);
  return std::string(text.substr(0, text.find('\n')));
}

Status DeadlineExceeded(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}

Status SystemError(const char* what) {
  return Internal(std::string(what) + ": " + std::strerror(errno));
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

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

Result<std::vector<NvidiaSmiRow>> ParseNvidiaSmiCsv(std::string_view text) {
  std::vector<NvidiaSmiRow> rows;
  int line_number = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_number;
    if (Trim(line).empty()) continue;
    auto bad = [&](std::string_view why) {
      return DataLoss("nvidia-smi output line " + std::to_string(line_number) + " \"" +
                      std::string(Trim(line)) + "\": " + std::string(why) +
                      " (expected: index, uuid, name, memory.total MiB, utilization %, "
                      "memory.used MiB)");
    };
    std::vector<std::string_view> f;
    for (std::string_view rest = line;;) {
      size_t comma = rest.find(',');
      f.push_back(Trim(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (f.size() != 6) return bad(std::to_string(f.size()) + " fields instead of 6");
    NvidiaSmiRow row;
    if (!ParseNumber(f[0], &row.info.index) || row.info.index < 0) return bad("bad index");
    if (f[1].empty() || NotAvailable(f[1])) return bad("no uuid");
    if (f[2].empty()) return bad("no name");
    row.info.uuid = f[1];
    row.info.name = f[2];
    uint64_t mib = 0;
    if (!NotAvailable(f[3])) {
      if (!ParseNumber(f[3], &mib)) return bad("bad memory.total");
      row.info.memory_bytes = mib * kMiB;
    }
    row.sample.index = row.info.index;
    int util = 0;
    if (!NotAvailable(f[4])) {
      if (!ParseNumber(f[4], &util) || util < 0 || util > 100) return bad("bad utilization.gpu");
      row.sample.utilization_percent = util;
    }
    if (!NotAvailable(f[5])) {
      if (!ParseNumber(f[5], &mib)) return bad("bad memory.used");
      row.sample.memory_used_bytes = mib * kMiB;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::string> RunNvidiaSmi(const std::string& program, Duration timeout) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return SystemError("pipe2");
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return SystemError("pipe2");
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  // Its own process group, so a timeout kills whatever it started too.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);

  std::string query = "--query-gpu=index,uuid,name,memory.total,utilization.gpu,memory.used";
  std::string format = "--format=csv,noheader,nounits";
  char* argv[] = {const_cast<char*>(program.c_str()), query.data(), format.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, program.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc == ENOENT) return NotFound(program + ": not found");
  if (rc == EACCES) return FailedPrecondition(program + ": not executable");
  if (rc != 0) return Internal("cannot start " + program + ": " + std::strerror(rc));
  Child child(pid);
  out_write.Reset();
  err_write.Reset();

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  std::string err;
  bool out_open = true;
  bool err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded(program + " did not finish within " +
                              std::to_string(timeout.count() / 1000) + " ms");
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0},
                     {err_open ? err_read.get() : -1, POLLIN, 0}};
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
    Fd owned(pidfd);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
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
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  std::string said = FirstLine(out.empty() ? err : out);
  std::string how = WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                      : "was killed by signal " + std::to_string(WTERMSIG(status));
  return FailedPrecondition(program + " " + how + (said.empty() ? "" : ": " + said));
}

Result<std::vector<NvidiaSmiRow>> NvidiaSmiGpuSource::Query() {
  ASSIGN_OR_RETURN(std::string out, RunNvidiaSmi(program_, timeout_));
  return ParseNvidiaSmiCsv(out);
}

Result<std::vector<GpuInfo>> NvidiaSmiGpuSource::List() {
  ASSIGN_OR_RETURN(std::vector<NvidiaSmiRow> rows, Query());
  std::vector<GpuInfo> gpus;
  for (NvidiaSmiRow& row : rows) gpus.push_back(std::move(row.info));
  return gpus;
}

Result<std::vector<GpuSample>> NvidiaSmiGpuSource::Sample() {
  Result<std::vector<NvidiaSmiRow>> rows = Query();
  if (!rows.ok()) return Unavailable(rows.status().message());
  std::vector<GpuSample> samples;
  for (const NvidiaSmiRow& row : *rows) samples.push_back(row.sample);
  return samples;
}

}  // namespace drover::worker
