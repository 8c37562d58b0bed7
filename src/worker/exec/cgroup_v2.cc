#include "worker/exec/cgroup_v2.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "worker/exec/cgroup_files.h"

namespace drover::worker {
namespace {

bool HasWord(const std::string& text, std::string_view word) {
  size_t pos = 0;
  while ((pos = text.find(word, pos)) != std::string::npos) {
    bool start = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '\n';
    size_t end = pos + word.size();
    bool stop = end == text.size() || text[end] == ' ' || text[end] == '\n';
    if (start && stop) return true;
    pos = end;
  }
  return false;
}

class CgroupV2Cage final : public TaskCage {
 public:
  CgroupV2Cage(std::string dir, int join_fd, uint64_t memory_limit, bool io)
      : dir_(std::move(dir)), io_(io) {
    join_fds_.push_back(join_fd);
    memory_limit_ = memory_limit;
  }

  bool contains_tree() const override { return true; }

  Result<std::vector<UniqueFd>> KillAll() override {
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, ReadProcs(dir_ + "/cgroup.procs"));
    if (pids.empty()) return std::vector<UniqueFd>();
    // cgroup.kill reaches every member atomically, forks in flight
    // included; the pidfds let the caller wait for the listed ones, and
    // their SIGKILL covers kernels older than 5.14 (no cgroup.kill).
    Status s = WriteCgroupFile(dir_ + "/cgroup.kill", "1");
    (void)s;
    return KillPids(pids);
  }

  Status Freeze(bool frozen) override {
    if (!frozen) return WriteCgroupFile(dir_ + "/cgroup.freeze", "0");
    // cgroup.events says "frozen 1" once every member has stopped, and its
    // change is an inotify event; the watch is made before the write so
    // the change cannot slip past. Without inotify, re-read every 10 ms.
    const std::string events = dir_ + "/cgroup.events";
    UniqueFd watch(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (watch.valid() && inotify_add_watch(watch.fd(), events.c_str(), IN_MODIFY) < 0) {
      watch.Reset();
    }
    RETURN_IF_ERROR(WriteCgroupFile(dir_ + "/cgroup.freeze", "1"));
    const Deadline deadline(kFreezeWait);
    for (;;) {
      if (ReadKeyedValue(events, "frozen") == 1u) return Status::Ok();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Left());
      if (left.count() <= 0) {
        return Unavailable(dir_ + " is not frozen after " +
                           std::to_string(kFreezeWait.count() / 1000) +
                           " ms: a member does not stop");
      }
      pollfd p{watch.fd(), POLLIN, 0};  // fd -1: poll only waits
      const int wait_ms =
          static_cast<int>(watch.valid() ? left.count() : std::min<int64_t>(left.count(), 10));
      if (poll(&p, 1, wait_ms) > 0) {
        char buf[4096];
        while (read(watch.fd(), buf, sizeof buf) > 0) {
        }
      }
    }
  }

  CageUsage Usage() override {
    CageUsage u;
    if (auto us = ReadKeyedValue(dir_ + "/cpu.stat", "usage_usec")) u.cpu = Duration(*us);
    u.peak_memory = ReadNumber(dir_ + "/memory.peak");
    auto kills = ReadKeyedValue(dir_ + "/memory.events", "oom_kill");
    u.oom_killed = kills && *kills > 0;
    // io.stat: one line per device, "MAJ:MIN rbytes=N wbytes=N rios=N ...";
    // absent (or empty, before any I/O) where the io controller is off.
    if (io_) {
      Result<std::string> stat = ReadCgroupFile(dir_ + "/io.stat");
      if (stat.ok()) {
        uint64_t read = 0;
        uint64_t written = 0;
        for (std::string_view rest = *stat; !rest.empty();) {
          const size_t end = std::min(rest.find('\n'), rest.size());
          std::string_view line = rest.substr(0, end);
          rest.remove_prefix(std::min(end + 1, rest.size()));
          for (auto [key, sum] : {std::pair{std::string_view(" rbytes="), &read},
                                  std::pair{std::string_view(" wbytes="), &written}}) {
            const size_t at = line.find(key);
            if (at == std::string_view::npos) continue;
            std::string_view digits = line.substr(at + key.size());
            digits = digits.substr(0, std::min(digits.find(' '), digits.size()));
            if (auto n = ParseNumber(digits)) *sum += *n;
          }
        }
        u.io_read_bytes = read;
        u.io_write_bytes = written;
      }
    }
    return u;
  }

  Status Remove() override {
    if (dir_.empty()) return Status::Ok();
    if (rmdir(dir_.c_str()) != 0 && errno != ENOENT) {
      return Unavailable("cannot remove " + dir_ + ": " + strerror(errno));
    }
    dir_.clear();
    return Status::Ok();
  }

 private:
  std::string dir_;
  bool io_;  // the io controller is on: io.stat counts its I/O
};

class CgroupV2Isolator final : public Isolator {
 public:
  CgroupV2Isolator(std::string base, bool cpuset, bool io)
      : base_(std::move(base)), cpuset_(cpuset), io_(io) {}
  ~CgroupV2Isolator() override { rmdir(base_.c_str()); }

  IsolationMode mode() const override { return IsolationMode::kCgroup2; }
  std::vector<std::string> cgroup_roots() const override { return {base_}; }

  Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) override {
    if (spec.container) {
      return FailedPrecondition("containers run in task cgroups on cgroup v1 workers only for now");
    }
    std::string dir = base_ + "/" + spec.name;
    if (mkdir(dir.c_str(), 0755) != 0) {
      return Unavailable("cannot create cgroup " + dir + ": " + strerror(errno));
    }
    auto fail = [&](Status s) -> Status {
      rmdir(dir.c_str());
      return s;
    };
    auto configure = [&]() -> Status {
      if (spec.memory_bytes > 0) {
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/memory.max", std::to_string(spec.memory_bytes)));
        // Without swap off, a limited task would page out instead of being
        // OOM-killed at its limit.
        Status swap = WriteCgroupFile(dir + "/memory.swap.max", "0");
        (void)swap;  // absent when swap accounting is off: nothing to limit
      }
      if (spec.milli_cpus > 0) {
        RETURN_IF_ERROR(
            WriteCgroupFile(dir + "/cpu.max", std::to_string(spec.milli_cpus * 100) + " 100000"));
      }
      if (spec.max_pids > 0) {
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/pids.max", std::to_string(spec.max_pids)));
      }
      if (cpuset_ && !spec.cores.empty()) {
        std::string list;
        for (int c : spec.cores) list += (list.empty() ? "" : ",") + std::to_string(c);
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.cpus", list));
      }
      if (spec.io.Any()) RETURN_IF_ERROR(WriteIoLimits(dir, spec));
      return Status::Ok();
    };
    Status s = configure();
    if (!s.ok()) return fail(s);
    std::string procs = dir + "/cgroup.procs";
    int fd = open(procs.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail(Unavailable("cannot open " + procs + ": " + strerror(errno)));
    return std::unique_ptr<TaskCage>(new CgroupV2Cage(dir, fd, spec.memory_bytes, io_));
  }

 private:
  // io.max for the throttles, io.weight for the share.
  Status WriteIoLimits(const std::string& dir, const CageSpec& spec) const {
    if (!io_) {
      return FailedPrecondition(
          "disk I/O limits need the cgroup v2 io controller, which is not "
          "enabled in " +
          base_.substr(0, base_.rfind('/')));
    }
    const core::IoLimits& io = spec.io;
    if (io.read_bps != 0 || io.write_bps != 0) {
      auto rate = [](uint64_t bps) { return bps == 0 ? std::string("max") : std::to_string(bps); };
      RETURN_IF_ERROR(WriteCgroupFile(
          dir + "/io.max",
          spec.io_device + " rbps=" + rate(io.read_bps) + " wbps=" + rate(io.write_bps)));
    }
    if (io.weight != 0) {
      RETURN_IF_ERROR(WriteCgroupFile(dir + "/io.weight", "default " + std::to_string(io.weight)));
    }
    return Status::Ok();
  }

  std::string base_;
  bool cpuset_;
  bool io_;
};

}  // namespace

Result<std::unique_ptr<Isolator>> MakeCgroupV2Isolator(const std::string& root) {
  Result<std::string> controllers = ReadCgroupFile(root + "/cgroup.controllers");
  if (!controllers.ok()) {
    return FailedPrecondition("no cgroup v2 tree at " + root + ": " +
                              controllers.status().message());
  }
  for (const char* c : {"memory", "cpu", "pids"}) {
    if (!HasWord(*controllers, c)) {
      return FailedPrecondition(std::string("cgroup v2 controller \"") + c +
                                "\" is not available in " + root);
    }
  }
  const bool cpuset = HasWord(*controllers, "cpuset");
  const bool io = HasWord(*controllers, "io");
  std::string enable = cpuset ? "+memory +cpu +pids +cpuset" : "+memory +cpu +pids";
  if (io) enable += " +io";
  Status s = WriteCgroupFile(root + "/cgroup.subtree_control", enable);
  if (!s.ok()) return FailedPrecondition("cgroup v2 root is not delegated: " + s.message());
  std::string base = root + "/w" + std::to_string(getpid());
  s = MakeDir(base);
  if (!s.ok()) return FailedPrecondition("cgroup v2 root is not writable: " + s.message());
  s = WriteCgroupFile(base + "/cgroup.subtree_control", enable);
  if (!s.ok()) {
    rmdir(base.c_str());
    return FailedPrecondition("cgroup v2 root is not delegated: " + s.message());
  }
  return std::unique_ptr<Isolator>(new CgroupV2Isolator(base, cpuset, io));
}

Result<std::string> DefaultCgroupV2Root(const std::string& mount) {
  ASSIGN_OR_RETURN(std::string current, CurrentCgroup(""));
  std::string parent = current.substr(0, current.rfind('/'));
  return mount + parent + "/drover";
}

}  // namespace drover::worker
