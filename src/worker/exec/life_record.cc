#include "worker/exec/life_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "worker/exec/cgroup_files.h"

namespace drover::worker {
namespace {

// The tasks log is rewritten with only its live entries past this size.
constexpr uint64_t kCompactBytes = 256 << 10;

// Cgroup roots recorded by a life in this process: another worker of the
// same process (`drover up`) may be using them, so a restart scan leaves
// them alone.
std::mutex roots_mu;
std::set<std::string>& RootsInUse() {
  static auto* roots = new std::set<std::string>();
  return *roots;
}

std::string Errno() { return strerror(errno); }

Result<std::string> ReadWhole(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return Unavailable("cannot read " + path + ": " + Errno());
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string e = Errno();
      close(fd);
      return Unavailable("cannot read " + path + ": " + e);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot create " + tmp + ": " + Errno());
  const ssize_t n = write(fd, text.data(), text.size());
  const std::string e = Errno();
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Unavailable("cannot write " + tmp + ": " + e);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot replace " + path + ": " + Errno());
  }
  return Status::Ok();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Every process now: pid and what its stat line says.
std::vector<std::pair<pid_t, ProcStat>> AllProcesses(const std::string& proc_root) {
  std::vector<std::pair<pid_t, ProcStat>> all;
  DIR* d = opendir(proc_root.c_str());
  if (d == nullptr) return all;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (auto st = ReadProcStat(static_cast<pid_t>(pid), proc_root)) {
      all.emplace_back(static_cast<pid_t>(pid), *st);
    }
  }
  closedir(d);
  return all;
}

// Opens a pidfd of `pid` and keeps it only if the process it names passes
// `ok` (read after the open: a pidfd names one process for good, so when
// the check passes the pidfd is the checked process's, or a dead one's).
template <typename Check>
int OpenChecked(pid_t pid, const std::string& proc_root, Check ok) {
  const int fd = PidfdOpen(pid);
  if (fd < 0) return -1;
  std::optional<ProcStat> st = ReadProcStat(pid, proc_root);
  if (!st || st->state == 'Z' || !ok(*st)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Waits until every pidfd has fired (its process exited) or the deadline
// passes; closes them all.
void WaitAndClose(std::vector<UniqueFd>& fds, const Deadline& deadline) {
  for (const UniqueFd& fd : fds) {
    pollfd p{fd.fd(), POLLIN, 0};
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
      const int r = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
      if (r < 0 && errno == EINTR) continue;
      break;
    }
  }
  fds.clear();  // closes them
}

// The cgroup directories below `root`, deepest first.
std::vector<std::string> CgroupsBelow(const std::string& root) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  return dirs;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid, const std::string& proc_root) {
  const std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // "PID (COMM) STATE PPID PGRP ... STARTTIME ...": COMM may hold spaces
  // and parentheses, so the fields start after the last ')'.
  const char* close_paren = strrchr(buf, ')');
  if (close_paren == nullptr) return std::nullopt;
  std::istringstream in(close_paren + 1);
  ProcStat st;
  std::string field;
  in >> st.state;
  for (int i = 4; i <= 22 && in >> field; ++i) {
    if (i == 5) st.pgrp = static_cast<pid_t>(strtol(field.c_str(), nullptr, 10));
    if (i == 22) {
      st.start_ticks = strtoull(field.c_str(), nullptr, 10);
      return st;
    }
  }
  return std::nullopt;
}

Result<std::unique_ptr<LifeRecord>> LifeRecord::Open(const std::string& dir, Duration wait,
                                                     std::string proc_root) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + dir + ": " + Errno());
  }
  const std::string lock = dir + "/lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot open " + lock + ": " + Errno());
  // A previous life's reaper holds the lock until it has sent its kills
  // (microseconds after the worker's death); flock has no timed wait, so
  // this polls for that short while.
  const Deadline deadline(wait);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK || deadline.Passed()) {
      const std::string holder = ReadWhole(lock).value_or("");
      close(fd);
      std::string who = SplitLines(holder).empty() ? "" : " (pid " + SplitLines(holder)[0] + ")";
      return FailedPrecondition("the work directory is in use by another worker" + who +
                                ": " + lock + " is locked");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string me = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) < 0) {
    const std::string e = Errno();
    close(fd);
    return Unavailable("cannot write " + lock + ": " + e);
  }
  return std::unique_ptr<LifeRecord>(new LifeRecord(dir, std::move(proc_root), fd));
}

LifeRecord::~LifeRecord() {
  if (tasks_fd_ >= 0) close(tasks_fd_);
  close(lock_fd_);
}

Result<LeftoverReport> LifeRecord::EndPreviousLife(Duration wait) {
  LeftoverReport report;
  const Deadline deadline(wait);
  std::vector<UniqueFd> dying;  // pidfds of the processes killed

  // The cgroup trees: everything in them is the previous life's.
  ASSIGN_OR_RETURN(std::string cgroups_text, ReadWhole(dir_ + "/cgroups"));
  std::vector<std::string> roots;
  {
    std::lock_guard<std::mutex> lock(roots_mu);
    for (const std::string& root : SplitLines(cgroups_text)) {
      if (RootsInUse().count(root) == 0 && Exists(root)) roots.push_back(root);
    }
  }
  std::vector<std::string> thaw;
  for (const std::string& root : roots) {
    // cgroup v2: one write kills the whole tree. cgroup v1: freeze it, so
    // that nothing forks between the listing and the kills.
    if (Exists(root + "/cgroup.kill")) {
      Status s = WriteCgroupFile(root + "/cgroup.kill", "1");
      (void)s;  // the listed members are killed one by one below as well
    }
    if (Exists(root + "/freezer.state") && WriteCgroupFile(root + "/freezer.state", "FROZEN").ok()) {
      thaw.push_back(root + "/freezer.state");
      for (int i = 0; i < 1000; ++i) {
        Result<std::string> now = ReadCgroupFile(root + "/freezer.state");
        if (!now.ok() || now->rfind("FROZEN", 0) == 0) break;
        std::this_thread::yield();
      }
    }
  }
  for (const std::string& root : roots) {
    for (const std::string& cgroup : CgroupsBelow(root)) {
      // A task frozen on its own (idle-desktop mode's Suspend) stays so
      // when its root thaws: thawed here, its kills take effect then.
      if (Exists(cgroup + "/freezer.state")) thaw.push_back(cgroup + "/freezer.state");
      Result<std::vector<pid_t>> pids = ReadProcs(cgroup + "/cgroup.procs");
      if (!pids.ok() || pids->empty()) continue;
      std::vector<UniqueFd> fds = KillPids(*pids);
      report.processes_killed += fds.size();
      if (!fds.empty()) report.tasks.push_back(std::filesystem::path(cgroup).filename().string());
      for (UniqueFd& fd : fds) dying.push_back(std::move(fd));
    }
  }
  for (const std::string& state : thaw) {
    Status s = WriteCgroupFile(state, "THAWED");
    (void)s;  // a tree left frozen is removed all the same once empty
  }

  // The process groups of the tasks log.
  ASSIGN_OR_RETURN(std::string tasks_text, ReadWhole(dir_ + "/tasks"));
  std::map<pid_t, std::pair<uint64_t, std::string>> recorded;  // pid -> start, name
  for (const std::string& line : SplitLines(tasks_text)) {
    std::istringstream in(line);
    char op = 0;
    long pid = 0;
    in >> op >> pid;
    if (!in || pid <= 0) continue;
    if (op == '-') {
      recorded.erase(static_cast<pid_t>(pid));
    } else if (op == '+') {
      uint64_t start = 0;
      std::string name;
      in >> start >> name;
      if (in || !name.empty()) recorded[static_cast<pid_t>(pid)] = {start, name};
    }
  }
  if (!recorded.empty()) {
    const std::vector<std::pair<pid_t, ProcStat>> all = AllProcesses(proc_root_);
    for (const auto& [leader, entry] : recorded) {
      const auto& [start, name] = entry;
      auto same = std::find_if(all.begin(), all.end(), [&](const auto& p) { return p.first == leader; });
      const bool leader_here = same != all.end() && same->second.state != 'Z';
      if (leader_here && same->second.start_ticks != start) {
        // Another process has the pid now: not ours, and neither is its group.
        report.notes.push_back("pid " + std::to_string(leader) + " of task " + name +
                               " now belongs to another process: left alone");
        continue;
      }
      // The leader itself (same pid, same start), or with the leader gone
      // the members of its group: started no earlier than it, still in a
      // group with its number. (Only if the number had been given to a new
      // group leader that then exited in turn, leaving members behind,
      // would those members pass this check too.)
      size_t killed = 0;
      for (const auto& [pid, st] : all) {
        if (st.pgrp != leader || st.start_ticks < start) continue;
        UniqueFd fd(OpenChecked(pid, proc_root_, [&](const ProcStat& now) {
          return now.pgrp == leader && now.start_ticks == st.start_ticks;
        }));
        if (!fd.valid()) continue;
        if (PidfdSendSignal(fd.fd(), SIGKILL) == 0) ++killed;
        dying.push_back(std::move(fd));
      }
      if (killed > 0) {
        report.processes_killed += killed;
        report.tasks.push_back(name);
      }
    }
  }

  WaitAndClose(dying, deadline);
  for (const std::string& root : roots) {
    for (const std::string& cgroup : CgroupsBelow(root)) {
      if (rmdir(cgroup.c_str()) != 0 && errno != ENOENT) {
        report.notes.push_back("cannot remove cgroup " + cgroup + ": " + Errno());
      }
    }
    if (rmdir(root.c_str()) != 0 && errno != ENOENT) {
      report.notes.push_back("cannot remove cgroup " + root + ": " + Errno());
    }
  }

  // This life starts with empty records.
  if (unlink((dir_ + "/cgroups").c_str()) != 0 && errno != ENOENT) {
    return Unavailable("cannot clear " + dir_ + "/cgroups: " + Errno());
  }
  const std::string tasks = dir_ + "/tasks";
  tasks_fd_ = open(tasks.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (tasks_fd_ < 0) return Unavailable("cannot clear " + tasks + ": " + Errno());
  live_.clear();
  written_ = 0;
  return report;
}

Status LifeRecord::RecordCgroupRoots(const std::vector<std::string>& roots) {
  std::string text;
  for (const std::string& root : roots) text += root + "\n";
  RETURN_IF_ERROR(WriteWhole(dir_ + "/cgroups", text));
  std::lock_guard<std::mutex> lock(roots_mu);
  RootsInUse().insert(roots.begin(), roots.end());
  return Status::Ok();
}

Status LifeRecord::TaskStarted(pid_t pid, std::string_view name) {
  std::optional<ProcStat> st = ReadProcStat(pid, proc_root_);
  if (!st) return Unavailable("cannot read the start time of pid " + std::to_string(pid));
  std::string line = "+ " + std::to_string(pid) + " " + std::to_string(st->start_ticks) + " " +
                     std::string(name) + "\n";
  live_[pid] = line;
  return Append(line);
}

Status LifeRecord::TaskEnded(pid_t pid) {
  if (live_.erase(pid) == 0) return Status::Ok();
  RETURN_IF_ERROR(Append("- " + std::to_string(pid) + "\n"));
  return written_ > kCompactBytes ? Compact() : Status::Ok();
}

Status LifeRecord::Append(const std::string& line) {
  if (tasks_fd_ < 0) return FailedPrecondition("the tasks log is not open (EndPreviousLife first)");
  // One write with O_APPEND: a line is whole in the file or absent.
  const ssize_t n = write(tasks_fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    return Unavailable("cannot write " + dir_ + "/tasks: " + Errno());
  }
  written_ += line.size();
  return Status::Ok();
}

Status LifeRecord::Compact() {
  std::string text;
  for (const auto& [pid, line] : live_) text += line;
  const std::string tasks = dir_ + "/tasks";
  RETURN_IF_ERROR(WriteWhole(tasks, text));
  const int fd = open(tasks.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot reopen " + tasks + ": " + Errno());
  close(tasks_fd_);
  tasks_fd_ = fd;
  written_ = text.size();
  return Status::Ok();
}

}  // namespace drover::worker
