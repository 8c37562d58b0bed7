#include "worker/cgroup_v1.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "worker/cgroup_files.h"

namespace drover::worker {
namespace {

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One controller hierarchy: where the worker's per-task cgroups go.
struct Hierarchy {
  bool present = false;
  std::string base;  // <mount>/<current>/drover/w<pid>
};

class CgroupV1Cage final : public TaskCage {
 public:
  explicit CgroupV1Cage(std::vector<std::string> dirs, std::string memory, std::string cpuacct,
                        std::string freezer)
      : dirs_(std::move(dirs)),
        memory_(std::move(memory)),
        cpuacct_(std::move(cpuacct)),
        freezer_(std::move(freezer)) {}

  bool contains_tree() const override { return true; }

  Result<std::vector<int>> KillAll() override {
    const std::string procs = freezer_ + "/cgroup.procs";
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, ReadProcs(procs));
    if (pids.empty()) return std::vector<int>();
    // Freeze first so that nothing forks between the listing and the kill;
    // the SIGKILLs take effect at thaw. The wait for FROZEN is bounded and
    // happens only when a task left processes behind (a kill, a daemon);
    // the v1 freezer has no event to wait on.
    RETURN_IF_ERROR(WriteCgroupFile(freezer_ + "/freezer.state", "FROZEN"));
    for (int i = 0; i < 1000; ++i) {
      Result<std::string> state = ReadCgroupFile(freezer_ + "/freezer.state");
      if (!state.ok() || state->rfind("FROZEN", 0) == 0) break;
      sched_yield();
    }
    Result<std::vector<pid_t>> frozen = ReadProcs(procs);
    std::vector<int> fds = KillPids(frozen.ok() ? *frozen : pids);
    Status thaw = WriteCgroupFile(freezer_ + "/freezer.state", "THAWED");
    (void)thaw;  // a cage that stays frozen is still removed once its members die
    return fds;
  }

  CageUsage Usage() override {
    CageUsage u;
    if (auto ns = ReadNumber(cpuacct_ + "/cpuacct.usage")) u.cpu = Duration(*ns / 1000);
    u.peak_memory = ReadNumber(memory_ + "/memory.max_usage_in_bytes");
    auto kills = ReadKeyedValue(memory_ + "/memory.oom_control", "oom_kill");
    u.oom_killed = kills && *kills > 0;
    return u;
  }

  Status Remove() override {
    while (!dirs_.empty()) {
      if (rmdir(dirs_.back().c_str()) != 0 && errno != ENOENT) {
        return Unavailable("cannot remove " + dirs_.back() + ": " + strerror(errno));
      }
      dirs_.pop_back();
    }
    return Status::Ok();
  }

  void AddJoinFd(int fd) { join_fds_.push_back(fd); }
  void SetMemoryLimit(uint64_t bytes) { memory_limit_ = bytes; }

 private:
  std::vector<std::string> dirs_;  // created, in creation order
  std::string memory_;
  std::string cpuacct_;
  std::string freezer_;
};

class CgroupV1Isolator final : public Isolator {
 public:
  CgroupV1Isolator(Hierarchy memory, Hierarchy cpu, Hierarchy cpuacct, Hierarchy cpuset,
                   Hierarchy pids, Hierarchy freezer, Hierarchy devices, std::string mems,
                   int gpu_count)
      : memory_(std::move(memory)),
        cpu_(std::move(cpu)),
        cpuacct_(std::move(cpuacct)),
        cpuset_(std::move(cpuset)),
        pids_(std::move(pids)),
        freezer_(std::move(freezer)),
        devices_(std::move(devices)),
        mems_(std::move(mems)),
        gpu_count_(gpu_count) {}

  ~CgroupV1Isolator() override {
    for (Hierarchy* h : {&memory_, &cpu_, &cpuacct_, &cpuset_, &pids_, &freezer_, &devices_}) {
      if (h->present) rmdir(h->base.c_str());  // fails harmlessly while a task remains
    }
  }

  IsolationMode mode() const override { return IsolationMode::kCgroup1; }

  Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) override {
    std::vector<std::string> dirs;
    std::vector<int> fds;
    auto undo = [&](Status s) -> Status {
      for (int fd : fds) close(fd);
      for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) rmdir(it->c_str());
      return s;
    };
    auto make = [&](const Hierarchy& h) -> Result<std::string> {
      std::string dir = h.base + "/" + spec.name;
      if (mkdir(dir.c_str(), 0755) != 0) {
        return Unavailable("cannot create cgroup " + dir + ": " + strerror(errno));
      }
      dirs.push_back(dir);
      return dir;
    };
    auto join = [&](const std::string& dir) -> Status {
      std::string procs = dir + "/cgroup.procs";
      int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return Unavailable("cannot open " + procs + ": " + strerror(errno));
      fds.push_back(fd);
      return Status::Ok();
    };
    auto step = [&]() -> Status {
      ASSIGN_OR_RETURN(std::string mem, make(memory_));
      if (spec.memory_bytes > 0) {
        RETURN_IF_ERROR(
            WriteCgroupFile(mem + "/memory.limit_in_bytes", std::to_string(spec.memory_bytes)));
      }
      RETURN_IF_ERROR(join(mem));
      ASSIGN_OR_RETURN(std::string acct, make(cpuacct_));
      RETURN_IF_ERROR(join(acct));
      ASSIGN_OR_RETURN(std::string frz, make(freezer_));
      RETURN_IF_ERROR(join(frz));
      if (spec.milli_cpus > 0 && cpu_.present) {
        ASSIGN_OR_RETURN(std::string dir, make(cpu_));
        // The default period is 100 ms; quota = share of it.
        RETURN_IF_ERROR(
            WriteCgroupFile(dir + "/cpu.cfs_quota_us", std::to_string(spec.milli_cpus * 100)));
        RETURN_IF_ERROR(join(dir));
      }
      if (!spec.cores.empty() && cpuset_.present) {
        ASSIGN_OR_RETURN(std::string dir, make(cpuset_));
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.cpus", Join(spec.cores)));
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.mems", mems_));
        RETURN_IF_ERROR(join(dir));
      }
      if (spec.max_pids > 0 && pids_.present) {
        ASSIGN_OR_RETURN(std::string dir, make(pids_));
        RETURN_IF_ERROR(WriteCgroupFile(dir + "/pids.max", std::to_string(spec.max_pids)));
        RETURN_IF_ERROR(join(dir));
      }
      if (gpu_count_ > 0 && devices_.present) {
        ASSIGN_OR_RETURN(std::string dir, make(devices_));
        for (int i = 0; i < gpu_count_; ++i) {
          bool assigned = false;
          for (int g : spec.gpus) assigned |= g == i;
          if (assigned) continue;
          RETURN_IF_ERROR(
              WriteCgroupFile(dir + "/devices.deny", "c 195:" + std::to_string(i) + " rwm"));
        }
        RETURN_IF_ERROR(join(dir));
      }
      return Status::Ok();
    };
    Status s = step();
    if (!s.ok()) return undo(s);
    auto cage = std::make_unique<CgroupV1Cage>(dirs, memory_.base + "/" + spec.name,
                                               cpuacct_.base + "/" + spec.name,
                                               freezer_.base + "/" + spec.name);
    for (int fd : fds) cage->AddJoinFd(fd);
    cage->SetMemoryLimit(spec.memory_bytes);
    return std::unique_ptr<TaskCage>(std::move(cage));
  }

 private:
  Hierarchy memory_, cpu_, cpuacct_, cpuset_, pids_, freezer_, devices_;
  std::string mems_;
  int gpu_count_;
};

// Finds the controller's mount and creates <current>/drover/w<pid> in it.
Result<Hierarchy> Prepare(const std::string& mounts, const std::string& controller, bool required) {
  Hierarchy h;
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
        Status w = WriteCgroupFile(dir + file, Trim(*v));
        if (!w.ok()) return h;
      }
    }
  }
  h.present = true;
  h.base = base;
  return h;
}

}  // namespace

Result<std::unique_ptr<Isolator>> MakeCgroupV1Isolator(const CgroupV1Options& options) {
  ASSIGN_OR_RETURN(Hierarchy memory, Prepare(options.mounts, "memory", true));
  ASSIGN_OR_RETURN(Hierarchy cpuacct, Prepare(options.mounts, "cpuacct", true));
  ASSIGN_OR_RETURN(Hierarchy freezer, Prepare(options.mounts, "freezer", true));
  ASSIGN_OR_RETURN(Hierarchy cpu, Prepare(options.mounts, "cpu", false));
  ASSIGN_OR_RETURN(Hierarchy cpuset, Prepare(options.mounts, "cpuset", false));
  ASSIGN_OR_RETURN(Hierarchy pids, Prepare(options.mounts, "pids", false));
  Hierarchy devices;
  if (options.gpu_count > 0) {
    ASSIGN_OR_RETURN(devices, Prepare(options.mounts, "devices", false));
  }
  std::string mems;
  if (cpuset.present) {
    Result<std::string> v = ReadCgroupFile(cpuset.base + "/cpuset.mems");
    if (v.ok()) mems = Trim(*v);
    if (mems.empty()) cpuset.present = false;
  }
  return std::unique_ptr<Isolator>(new CgroupV1Isolator(
      std::move(memory), std::move(cpu), std::move(cpuacct), std::move(cpuset), std::move(pids),
      std::move(freezer), std::move(devices), std::move(mems), options.gpu_count));
}

}  // namespace drover::worker
