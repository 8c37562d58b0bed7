#include "worker/exec/cgroup_files.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace drover::worker {
namespace {

std::string TrimV1(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Status WriteCgroupFile(const std::string& path, std::string_view value) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + strerror(errno));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return FailedPrecondition("cannot write \"" + std::string(value) + "\" to " + path + ": " +
                              (n < 0 ? strerror(err) : "short write"));
  }
  return Status::Ok();
}

Result<std::string> ReadCgroupFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return Unavailable("cannot open " + path + ": " + strerror(errno));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    int err = errno;
    close(fd);
    if (n < 0) return Unavailable("cannot read " + path + ": " + strerror(err));
    return out;
  }
}

namespace {
std::optional<uint64_t> ParseU64(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<uint64_t> ReadKeyedValue(const std::string& path, std::string_view key) {
  Result<std::string> text = ReadCgroupFile(path);
  if (!text.ok()) return std::nullopt;
  return ParseKeyedValue(*text, key);
}

std::optional<uint64_t> ParseNumber(std::string_view text) { return ParseU64(text); }

std::optional<uint64_t> ParseKeyedValue(std::string_view text, std::string_view key) {
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseU64(line.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> ReadNumber(const std::string& path) {
  Result<std::string> text = ReadCgroupFile(path);
  if (!text.ok()) return std::nullopt;
  return ParseU64(*text);
}

KeptFile::KeptFile(KeptFile&& other) noexcept
    : path_(std::move(other.path_)),
      writable_(other.writable_),
      fd_(std::exchange(other.fd_, -1)) {}

KeptFile& KeptFile::operator=(KeptFile&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    writable_ = other.writable_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool KeptFile::Open() {
  if (fd_ < 0) fd_ = open(path_.c_str(), (writable_ ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  return fd_ >= 0;
}

Status KeptFile::Write(std::string_view value) {
  if (!writable_) return FailedPrecondition(path_ + " was not kept for writing");
  if (!Open()) return Unavailable("cannot open " + path_ + ": " + strerror(errno));
  ssize_t n;
  do {
    n = pwrite(fd_, value.data(), value.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(value.size())) {
    const int err = n < 0 ? errno : EIO;
    Close();  // opened again next time
    return Unavailable("cannot write " + path_ + ": " + strerror(err));
  }
  return Status::Ok();
}

void KeptFile::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::optional<std::string> KeptFile::Read() {
  if (!Open()) return std::nullopt;
  char buf[4096];
  ssize_t n;
  do {
    n = pread(fd_, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    Close();  // opened again next time
    return std::nullopt;
  }
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::vector<pid_t>> ReadProcs(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadCgroupFile(path));
  std::vector<pid_t> pids;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::optional<uint64_t> v = ParseU64(rest.substr(0, nl));
    if (v && *v > 0) pids.push_back(static_cast<pid_t>(*v));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return pids;
}

std::vector<UniqueFd> KillPids(const std::vector<pid_t>& pids) {
  std::vector<UniqueFd> fds;
  for (pid_t pid : pids) {
    UniqueFd fd(PidfdOpen(pid));
    if (!fd.valid()) continue;  // already gone
    PidfdSendSignal(fd.fd(), SIGKILL);
    fds.push_back(std::move(fd));
  }
  return fds;
}

Result<std::string> CurrentCgroup(std::string_view controller) {
  ASSIGN_OR_RETURN(std::string text, ReadCgroupFile("/proc/self/cgroup"));
  // Lines: "4:memory:/a/b", "1:cpu,cpuacct:/", "0::/x" (v2).
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view list = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    if (controller.empty()) {
      if (list.empty() && line.substr(0, c1) == "0") return std::string(path);
      continue;
    }
    while (!list.empty()) {
      size_t comma = list.find(',');
      if (list.substr(0, comma) == controller) return std::string(path);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return NotFound("no cgroup for controller \"" + std::string(controller) +
                  "\" in /proc/self/cgroup");
}

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

Result<bool> FreezeV1AndWait(const std::string& state, Duration bound) {
  const Deadline deadline(bound);
  for (int tries = 0;; ++tries) {
    if (tries % 16 == 0) RETURN_IF_ERROR(WriteCgroupFile(state, "FROZEN"));
    Result<std::string> now = ReadCgroupFile(state);
    if (!now.ok()) return false;
    if (now->rfind("FROZEN", 0) == 0) return true;
    if (deadline.Passed()) return false;
    if (tries < 1000) {
      sched_yield();
    } else {
      poll(nullptr, 0, 1);
    }
  }
}

Result<std::optional<std::string>> PrepareV1Base(const std::string& mounts,
                                                 const std::string& controller, bool required) {
  const std::optional<std::string> h;  // absent
  std::string mount = mounts + "/" + controller;
  struct stat st;
  Result<std::string> current = CurrentCgroup(controller);
  if (stat(mount.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !current.ok()) {
    if (required) {
      return FailedPrecondition("cgroup v1 controller \"" + controller + "\" is not mounted at " +
                                mount);
    }
    return h;
  }
  std::string parent = mount + (*current == "/" ? "" : *current);
  std::string drover = parent + "/drover";
  std::string base = drover + "/w" + std::to_string(getpid());
  for (const std::string& dir : {drover, base}) {
    Status s = MakeDir(dir);
    if (!s.ok()) {
      if (required) return FailedPrecondition("cgroup v1 is not writable: " + s.message());
      return h;
    }
    if (controller == "cpuset") {
      // A cpuset cgroup accepts no task until its cpus and mems are set;
      // start each level with everything its parent has.
      std::string up = dir.substr(0, dir.rfind('/'));
      for (const char* file : {"/cpuset.cpus", "/cpuset.mems"}) {
        Result<std::string> v = ReadCgroupFile(up + file);
        if (!v.ok()) return h;
        Status w = WriteCgroupFile(dir + file, TrimV1(*v));
        if (!w.ok()) return h;
      }
    }
  }
  return std::optional<std::string>(std::move(base));
}

}  // namespace drover::worker
