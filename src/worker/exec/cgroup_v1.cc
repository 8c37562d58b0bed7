#include "worker/exec/cgroup_v1.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "worker/exec/cgroup_files.h"

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

enum Ctl { kMemory, kCpuacct, kFreezer, kCpu, kCpuset, kPids, kDevices, kBlkio, kCtlCount };

// Memory a reused memory cgroup may still have charged from its last task
// (page cache, kernel objects: ~170 KiB after /bin/true) before it is
// emptied with memory.force_empty; it counts in the next task's peak.
constexpr uint64_t kStaleChargeBytes = 1 << 20;
// Empty cgroups kept per hierarchy for later tasks.
constexpr size_t kMaxFree = 64;

// A task cgroup in one hierarchy. Once its task has ended and left nothing
// behind it goes back to the pool and serves a later task: making and
// removing a memory cgroup costs far more than the few writes that reset
// one (see Recycle).
struct Group {
  std::string dir;
  int join_fd = -1;   // cgroup.procs, O_WRONLY; the child writes "0"
  std::string limit;  // what was last written to the controller's limit file; "": nothing
  uint64_t base = 0;  // cpuacct: usage so far; memory: oom_kill count so far
  // Read after every task (kept open while pooled): cpuacct.usage,
  // memory.max_usage_in_bytes, freezer cgroup.procs; memory.oom_control;
  // memory.usage_in_bytes.
  KeptFile counter, oom, usage;
};

// Opens `g`'s kept files lazily, named for its controller.
void Keep(Ctl ctl, Group& g) {
  if (ctl == kCpuacct) g.counter = KeptFile(g.dir + "/cpuacct.usage");
  if (ctl == kFreezer) g.counter = KeptFile(g.dir + "/cgroup.procs");
  if (ctl == kMemory) {
    g.counter = KeptFile(g.dir + "/memory.max_usage_in_bytes", /*writable=*/true);
    g.oom = KeptFile(g.dir + "/memory.oom_control");
    g.usage = KeptFile(g.dir + "/memory.usage_in_bytes");
  }
}

// How long KillAll waits for the freeze that keeps a cage's members from
// forking away (its kills take effect at the thaw whether or not every
// member stopped in time). Freeze waits kFreezeWait.
constexpr Duration kKillFreezeWait = Millis(100);

// One cgroup a cage has: its hierarchy, and the value of its limit file
// (none: nullptr) beside what a new cgroup has there.
struct Want {
  Ctl ctl;
  const char* file;
  std::string value;
  const char* fresh;
};

// The free cgroups; shared by the isolator and its cages, so that a cage
// that outlives its isolator removes its cgroups instead.
struct Pool {
  std::vector<Group> free[kCtlCount];
  bool closed = false;
};

std::atomic<uint64_t> next_cgroup_name{0};

// Closes the kept counter files (before the group's directory goes; they
// open again when read).
void CloseKept(Group& g) {
  g.counter.Close();
  g.oom.Close();
  g.usage.Close();
}

void Discard(Group& g) {
  if (g.join_fd >= 0) close(g.join_fd);
  g.join_fd = -1;
  CloseKept(g);
}

class CgroupV1Cage final : public TaskCage {
 public:
  explicit CgroupV1Cage(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {
    owns_join_fds_ = false;  // the groups keep them, for reuse
  }
  ~CgroupV1Cage() override {
    for (auto& [ctl, g] : groups_) Discard(g);  // Remove never succeeded: leave the dirs
  }

  void Add(Ctl ctl, Group g) {
    join_fds_.push_back(g.join_fd);
    groups_.emplace_back(ctl, std::move(g));
  }
  void SetMemoryLimit(uint64_t bytes) { memory_limit_ = bytes; }
  void SetGpus(std::vector<int> gpus) { gpus_ = std::move(gpus); }
  const std::vector<int>& gpus() const { return gpus_; }
  bool Has(Ctl ctl) { return Find(ctl) != nullptr; }
  // Fit to serve another task with its holder inside (RefitCage).
  bool Refittable() const {
    return measured_ && reusable_ && !left_behind_ && !nested_ && !frozen_ && !holder_left_;
  }

  bool HoldsOnly(pid_t pid) override {
    if (nested_ || left_behind_ || frozen_) return false;
    std::optional<std::string> listed = Find(kFreezer)->counter.Read();
    return listed && Trim(*listed) == std::to_string(pid);
  }

  // RefitCage's writes: each limit in `wants` where it differs, the
  // memory limit raised by what the holder has charged now, which the
  // peak then leaves out. Counters go on from where Usage left them.
  Status Refit(const std::vector<Want>& wants, uint64_t memory_bytes) {
    Group& mem = *Find(kMemory);
    std::optional<std::string> now = mem.usage.Read();
    std::optional<uint64_t> held = now ? ParseNumber(*now) : std::nullopt;
    if (!held) return Unavailable("cannot read " + mem.dir + "/memory.usage_in_bytes");
    for (const Want& w : wants) {
      if (w.file == nullptr) continue;
      Group& g = *Find(w.ctl);
      const std::string value =
          w.ctl == kMemory && memory_bytes > 0 ? std::to_string(memory_bytes + *held) : w.value;
      if ((g.limit.empty() ? std::string(w.fresh) : g.limit) == value) continue;
      RETURN_IF_ERROR(WriteCgroupFile(g.dir + "/" + w.file, value));
      g.limit = value;
    }
    RETURN_IF_ERROR(mem.counter.Write("0"));  // the peak starts again from the usage
    held_ = *held;
    memory_limit_ = memory_bytes;
    join_fds_.clear();
    for (const auto& [ctl, g] : groups_) join_fds_.push_back(g.join_fd);
    return Status::Ok();
  }
  // v1 counts an OOM kill (memory.oom_control's oom_kill) in the cgroup of
  // the process killed only, and a container's cgroup below the cage is
  // gone by the time its end is measured: an eventfd on the cage's own
  // memory.oom_control (cgroup.event_control) counts each time its limit
  // called the OOM killer, wherever below it the victim was.
  Status WatchOom() {
    const std::string dir = Dir(kMemory);
    UniqueFd oom(open((dir + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC));
    UniqueFd event(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!oom.valid() || !event.valid()) {
      return Unavailable("cannot watch " + dir + " for OOM kills: " + strerror(errno));
    }
    RETURN_IF_ERROR(WriteCgroupFile(dir + "/cgroup.event_control",
                                    std::to_string(event.fd()) + " " + std::to_string(oom.fd())));
    oom_file_ = std::move(oom);
    oom_event_ = std::move(event);
    return Status::Ok();
  }
  // A container runtime makes cgroups under this cage's: its kill and
  // removal reach them, and it is never reused.
  void SetNested() { nested_ = true; }

  bool contains_tree() const override { return true; }

  Result<std::vector<UniqueFd>> KillAll() override {
    // Empty, as after nearly every task: one read of the kept file says so.
    std::optional<std::string> listed = Find(kFreezer)->counter.Read();
    if (listed && listed->empty() && !nested_) return std::vector<UniqueFd>();
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, ListTree(Dir(kFreezer)));
    if (pids.empty()) return std::vector<UniqueFd>();
    left_behind_ = true;  // not reused: its members may be dying still
    // Freeze first so that nothing forks between the listing and the kill;
    // the SIGKILLs take effect at thaw. The wait for FROZEN is bounded and
    // happens only when a task left processes behind (a kill, a daemon).
    // A cage Freeze stopped is thawed here too: its members die.
    const std::string state = Dir(kFreezer) + "/freezer.state";
    Result<bool> stopped = FreezeV1AndWait(state, kKillFreezeWait);
    if (!stopped.ok()) return stopped.status();
    Result<std::vector<pid_t>> frozen = ListTree(Dir(kFreezer));
    std::vector<UniqueFd> fds = KillPids(frozen.ok() ? *frozen : pids);
    Status thaw = WriteCgroupFile(state, "THAWED");
    // A cage that stays frozen is still removed once its members die; it
    // is not reused (left_behind_).
    frozen_ = !thaw.ok();
    return fds;
  }

  void HolderLeft() override { holder_left_ = true; }

  Status Freeze(bool frozen) override {
    const std::string state = Dir(kFreezer) + "/freezer.state";
    if (!frozen) {
      RETURN_IF_ERROR(WriteCgroupFile(state, "THAWED"));
      frozen_ = false;
      return Status::Ok();
    }
    frozen_ = true;  // from the first write on, partly frozen until thawed
    ASSIGN_OR_RETURN(bool stopped, FreezeV1AndWait(state, kFreezeWait));
    if (!stopped) {
      return Unavailable(state + " is not FROZEN after " +
                         std::to_string(kFreezeWait.count() / 1000) +
                         " ms: a member does not stop");
    }
    return Status::Ok();
  }

  CageUsage Usage() override {
    CageUsage u;
    Group* acct = Find(kCpuacct);
    Group* mem = Find(kMemory);
    // A reused cgroup counts from where its last task left it.
    std::optional<std::string> acct_text = acct->counter.Read();
    if (auto ns = acct_text ? ParseNumber(*acct_text) : std::nullopt) {
      u.cpu = Duration((*ns - std::min(*ns, acct->base)) / 1000);
      acct->base = *ns;
    } else {
      reusable_ = false;
    }
    std::optional<std::string> peak = mem->counter.Read();
    u.peak_memory = peak ? ParseNumber(*peak) : std::nullopt;
    if (u.peak_memory) *u.peak_memory -= std::min(*u.peak_memory, held_);
    std::optional<std::string> oom = mem->oom.Read();
    auto kills = oom ? ParseKeyedValue(*oom, "oom_kill") : std::nullopt;
    u.oom_killed = kills && *kills > mem->base;
    uint64_t ooms = 0;
    if (oom_event_.valid() && read(oom_event_.fd(), &ooms, sizeof ooms) == sizeof ooms) {
      u.oom_killed |= ooms > 0;
    }
    if (kills) {
      mem->base = *kills;
    } else {
      reusable_ = false;
    }
    // A task with disk I/O limits has a blkio cgroup of its own (never
    // reused: its counters start at zero). Lines "MAJ:MIN Read N",
    // "MAJ:MIN Write N", ... and a last "Total N".
    if (const Group* blkio = Find(kBlkio)) {
      Result<std::string> stat =
          ReadCgroupFile(blkio->dir + "/blkio.throttle.io_service_bytes_recursive");
      if (stat.ok()) {
        uint64_t read = 0;
        uint64_t written = 0;
        std::istringstream lines(*stat);
        std::string device, op;
        uint64_t n = 0;
        while (lines >> device >> op >> n) {
          if (op == "Read") read += n;
          if (op == "Write") written += n;
        }
        u.io_read_bytes = read;
        u.io_write_bytes = written;
      }
    }
    measured_ = true;
    return u;
  }

  Status Remove() override {
    // A frozen cgroup would stop the next task that joins it.
    if (frozen_ && Find(kFreezer) != nullptr) {
      if (WriteCgroupFile(Dir(kFreezer) + "/freezer.state", "THAWED").ok()) {
        frozen_ = false;
      } else {
        reusable_ = false;
      }
    }
    if (measured_ && reusable_ && !left_behind_ && !nested_ && !pool_->closed && Recycle()) {
      for (auto& [ctl, g] : groups_) {
        if (ctl == kDevices || ctl == kBlkio || pool_->free[ctl].size() >= kMaxFree) {
          Discard(g);
          rmdir(g.dir.c_str());  // empty: the task left nothing
        } else {
          pool_->free[ctl].push_back(std::move(g));
        }
      }
      groups_.clear();
      return Status::Ok();
    }
    while (!groups_.empty()) {
      Group& g = groups_.back().second;
      CloseKept(g);  // reopened if the removal fails and the cage is kept
      if (nested_) RETURN_IF_ERROR(RemoveBelow(g.dir));
      if (rmdir(g.dir.c_str()) != 0 && errno != ENOENT) {
        return Unavailable("cannot remove " + g.dir + ": " + strerror(errno));
      }
      Discard(g);
      groups_.pop_back();
    }
    return Status::Ok();
  }

 private:
  std::string Dir(Ctl ctl) { return Find(ctl)->dir; }

  // The members of the cgroup `dir` and of every cgroup below it (a
  // nested cage's container), or its own only.
  Result<std::vector<pid_t>> ListTree(const std::string& dir) {
    ASSIGN_OR_RETURN(std::vector<pid_t> pids, ReadProcs(dir + "/cgroup.procs"));
    if (!nested_) return pids;
    for (const std::string& child : ChildDirs(dir)) {
      Result<std::vector<pid_t>> below = ListTree(child);
      if (below.ok()) pids.insert(pids.end(), below->begin(), below->end());
    }
    return pids;
  }

  static std::vector<std::string> ChildDirs(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (e->d_type == DT_DIR && name != "." && name != "..") out.push_back(dir + "/" + name);
      }
      closedir(d);
    }
    return out;
  }

  // Removes the cgroups below `dir`, deepest first.
  static Status RemoveBelow(const std::string& dir) {
    for (const std::string& child : ChildDirs(dir)) {
      RETURN_IF_ERROR(RemoveBelow(child));
      if (rmdir(child.c_str()) != 0 && errno != ENOENT) {
        return Unavailable("cannot remove " + child + ": " + strerror(errno));
      }
    }
    return Status::Ok();
  }
  Group* Find(Ctl ctl) {
    for (auto& [c, g] : groups_) {
      if (c == ctl) return &g;
    }
    return nullptr;
  }

  // Makes the memory cgroup fit for the next task: what the last one left
  // charged goes (when more than kStaleChargeBytes), and the peak starts
  // again from the current usage. Everything else reads as a difference
  // (cpuacct, oom_kill) or is written when the next task wants another
  // value (limits).
  bool Recycle() {
    Group& group = *Find(kMemory);
    const std::string& mem = group.dir;
    std::optional<std::string> now = group.usage.Read();
    std::optional<uint64_t> usage = now ? ParseNumber(*now) : std::nullopt;
    if (!usage) return false;
    if (*usage > kStaleChargeBytes) {
      // Held by a process that lives on elsewhere: nothing to reclaim, and
      // force_empty would try hard (~100 ms) before it gave up.
      if (holder_left_) return false;
      if (!WriteCgroupFile(mem + "/memory.force_empty", "0").ok()) return false;
      usage = ReadNumber(mem + "/memory.usage_in_bytes");
      if (!usage || *usage > kStaleChargeBytes) return false;
    }
    return group.counter.Write("0").ok();  // one pwrite on the kept file
  }

  std::shared_ptr<Pool> pool_;
  std::vector<std::pair<Ctl, Group>> groups_;  // in creation order
  bool measured_ = false;                      // Usage read the counters' ends
  bool reusable_ = true;
  bool holder_left_ = false;  // HolderLeft: a warm interpreter moved out
  bool left_behind_ = false;  // KillAll found processes
  bool nested_ = false;       // SetNested: cgroups below its own
  UniqueFd oom_file_, oom_event_;  // WatchOom's: memory.oom_control, the eventfd
  bool frozen_ = false;       // Freeze(true) wrote FROZEN, not thawed since
  std::vector<int> gpus_;     // those its devices cgroup allows
  uint64_t held_ = 0;         // charged by its holder before this task (Refit)
};

class CgroupV1Isolator final : public Isolator {
 public:
  CgroupV1Isolator(Hierarchy memory, Hierarchy cpu, Hierarchy cpuacct, Hierarchy cpuset,
                   Hierarchy pids, Hierarchy freezer, Hierarchy devices, Hierarchy blkio,
                   std::string mems, int gpu_count, std::string blkio_mount)
      : mems_(std::move(mems)), gpu_count_(gpu_count), blkio_mount_(std::move(blkio_mount)) {
    h_[kBlkio] = std::move(blkio);
    h_[kMemory] = std::move(memory);
    h_[kCpu] = std::move(cpu);
    h_[kCpuacct] = std::move(cpuacct);
    h_[kCpuset] = std::move(cpuset);
    h_[kPids] = std::move(pids);
    h_[kFreezer] = std::move(freezer);
    h_[kDevices] = std::move(devices);
  }

  ~CgroupV1Isolator() override {
    pool_->closed = true;
    for (int c = 0; c < kCtlCount; ++c) {
      for (Group& g : pool_->free[c]) {
        Discard(g);
        rmdir(g.dir.c_str());
      }
      pool_->free[c].clear();
    }
    for (const Hierarchy& h : h_) {
      if (h.present) rmdir(h.base.c_str());  // fails harmlessly while a task remains
    }
  }

  IsolationMode mode() const override { return IsolationMode::kCgroup1; }
  std::vector<std::string> cgroup_roots() const override {
    std::vector<std::string> roots = {h_[kFreezer].base};
    for (int c = 0; c < kCtlCount; ++c) {
      if (c != kFreezer && h_[c].present) roots.push_back(h_[c].base);
    }
    return roots;
  }

  Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) override {
    auto cage = std::make_unique<CgroupV1Cage>(pool_);
    // Takes a free cgroup of the hierarchy, or makes one, and gives it
    // `value` in `file` (written only when it differs from what the
    // cgroup has; `fresh_default` is what a new cgroup has there).
    auto take = [&](Ctl ctl, const char* file, const std::string& value,
                    const std::string& fresh_default) -> Status {
      std::vector<Group>& free = pool_->free[ctl];
      if (ctl != kDevices && ctl != kBlkio && !free.empty()) {
        Group g = std::move(free.back());
        free.pop_back();
        const std::string& have = g.limit.empty() ? fresh_default : g.limit;
        if (file == nullptr || have == value ||
            WriteCgroupFile(g.dir + "/" + file, value).ok()) {
          if (file != nullptr) g.limit = value;
          cage->Add(ctl, std::move(g));
          return Status::Ok();
        }
        // A limit this cgroup refuses (memory below what it holds): use a
        // new one instead.
        Discard(g);
        rmdir(g.dir.c_str());
      }
      Group g;
      // Names are unique in the process (`drover up` runs several workers,
      // each with its isolator, under one w<pid>); one left by an earlier
      // process with this pid is skipped.
      for (int tries = 0;; ++tries) {
        g.dir = h_[ctl].base + "/t" + std::to_string(next_cgroup_name.fetch_add(1));
        if (mkdir(g.dir.c_str(), 0755) == 0) break;
        if (errno != EEXIST || tries >= 100) {
          return Unavailable("cannot create cgroup " + g.dir + ": " + strerror(errno));
        }
      }
      auto fail = [&](Status s) {
        Discard(g);
        rmdir(g.dir.c_str());
        return s;
      };
      if (ctl == kCpuset) {
        Status m = WriteCgroupFile(g.dir + "/cpuset.mems", mems_);
        if (!m.ok()) return fail(m);
      }
      if (file != nullptr && value != fresh_default) {
        Status w = WriteCgroupFile(g.dir + "/" + file, value);
        if (!w.ok()) return fail(w);
      }
      if (file != nullptr) g.limit = value;
      if (ctl == kDevices) {
        for (int i = 0; i < gpu_count_; ++i) {
          bool assigned = spec.holding;
          for (int gpu : spec.gpus) assigned |= gpu == i;
          if (assigned) continue;
          Status w = WriteCgroupFile(g.dir + "/devices.deny", "c 195:" + std::to_string(i) + " rwm");
          if (!w.ok()) return fail(w);
        }
      }
      if (ctl == kBlkio) {
        Status w = WriteIoLimits(g.dir, spec);
        if (!w.ok()) return fail(w);
      }
      const std::string procs = g.dir + "/cgroup.procs";
      g.join_fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (g.join_fd < 0) return fail(Unavailable("cannot open " + procs + ": " + strerror(errno)));
      Keep(ctl, g);
      cage->Add(ctl, std::move(g));
      return Status::Ok();
    };
    Result<std::vector<Want>> wants = Wants(spec);
    if (!wants.ok()) return wants.status();
    if (spec.container) cage->SetNested();
    for (const Want& w : *wants) {
      Status s = take(w.ctl, w.file, w.value, w.fresh);
      if (!s.ok()) {
        Status r = cage->Remove();  // nothing ran in it: its cgroups are removed
        (void)r;
        return s;
      }
    }
    cage->SetGpus(spec.gpus);
    cage->SetMemoryLimit(spec.memory_bytes);
    if (spec.container) {
      Status watched = cage->WatchOom();
      if (!watched.ok()) {
        Status r = cage->Remove();
        (void)r;
        return watched;
      }
    }
    return std::unique_ptr<TaskCage>(std::move(cage));
  }

  Status RefitCage(TaskCage& base, const CageSpec& spec) override {
    auto& cage = static_cast<CgroupV1Cage&>(base);
    if (spec.container || spec.holding || spec.io.Any() || !cage.Refittable() ||
        cage.Has(kBlkio)) {  // a blkio cgroup keeps its throttles: never reused
      return FailedPrecondition("a cage for a container, disk limits or a holder is made afresh");
    }
    if (gpu_count_ > 0 && cage.gpus() != spec.gpus) {
      return FailedPrecondition("the cage's devices cgroup is for other GPUs");
    }
    ASSIGN_OR_RETURN(std::vector<Want> wants, Wants(spec));
    for (const Want& w : wants) {
      if (!cage.Has(w.ctl)) return FailedPrecondition("the cage lacks a cgroup the task needs");
    }
    // What the cage has and the task does not need is left unlimited.
    auto unlimited = [&](Ctl ctl, const char* file, std::string value, const char* fresh) {
      for (const Want& w : wants) {
        if (w.ctl == ctl) return;
      }
      if (cage.Has(ctl)) wants.push_back(Want{ctl, file, std::move(value), fresh});
    };
    RETURN_IF_ERROR(AddUnlimited(unlimited));
    return cage.Refit(wants, spec.memory_bytes);
  }

 private:
  // The cgroups a cage for `spec` has, in the order they are made.
  Result<std::vector<Want>> Wants(const CageSpec& spec) {
    std::vector<Want> wants;
    auto add = [&](Ctl ctl, const char* file, std::string value, const char* fresh) {
      for (const Want& w : wants) {
        if (w.ctl == ctl) return;
      }
      wants.push_back(Want{ctl, file, std::move(value), fresh});
    };
    add(kMemory, "memory.limit_in_bytes",
        spec.memory_bytes > 0 ? std::to_string(spec.memory_bytes) : "-1", "-1");
    add(kCpuacct, nullptr, "", "");
    add(kFreezer, nullptr, "", "");
    // A holder has a cgroup in every hierarchy, without limits: a process
    // moved in leaves every task cgroup it was in. A container's cgroups
    // are made under the cage's in every hierarchy its runtime uses: the
    // cage has one in each, unlimited where the task asked for nothing.
    if (spec.holding && h_[kBlkio].present) add(kBlkio, nullptr, "", "");
    if (spec.holding) RETURN_IF_ERROR(AddUnlimited(add));
    // Pinned to exactly as many cores as it asked CPUs, the task is
    // capped by its cpuset already: a quota of the same size would only
    // add a cgroup to join (~60 us of every start on a VM).
    const bool capped_by_cpuset = h_[kCpuset].present && !spec.cores.empty() &&
                                  spec.milli_cpus == static_cast<int64_t>(spec.cores.size()) * 1000;
    if (spec.milli_cpus > 0 && h_[kCpu].present && !capped_by_cpuset) {
      // The default period is 100 ms; quota = share of it.
      add(kCpu, "cpu.cfs_quota_us", std::to_string(spec.milli_cpus * 100), "-1");
    }
    if (!spec.cores.empty() && h_[kCpuset].present) {
      add(kCpuset, "cpuset.cpus", Join(spec.cores), "");
    }
    if (spec.max_pids > 0 && h_[kPids].present) {
      add(kPids, "pids.max", std::to_string(spec.max_pids), "max");
    }
    if (gpu_count_ > 0 && h_[kDevices].present) add(kDevices, nullptr, "", "");
    if (spec.container) {
      RETURN_IF_ERROR(AddUnlimited(add));
      if (h_[kDevices].present) add(kDevices, nullptr, "", "");
      if (h_[kBlkio].present && !spec.io.Any()) add(kBlkio, nullptr, "", "");
    }
    if (spec.io.Any()) {
      if (!h_[kBlkio].present) {
        return FailedPrecondition(
            "disk I/O limits need the cgroup v1 blkio controller, which "
            "is not mounted (or not writable) at " +
            blkio_mount_);
      }
      add(kBlkio, nullptr, "", "");
    }
    return wants;
  }

  // cpu, cpuset and pids cgroups without limits, where mounted.
  template <typename Add>
  Status AddUnlimited(Add& add) {
    if (h_[kCpu].present) add(kCpu, "cpu.cfs_quota_us", "-1", "-1");
    if (h_[kCpuset].present) {
      ASSIGN_OR_RETURN(std::string all, AllCpus());
      add(kCpuset, "cpuset.cpus", all, "");
    }
    if (h_[kPids].present) add(kPids, "pids.max", "max", "max");
    return Status::Ok();
  }

  // Every core the worker's cpuset allows.
  Result<std::string> AllCpus() {
    if (all_cpus_.empty()) {
      ASSIGN_OR_RETURN(std::string all, ReadCgroupFile(h_[kCpuset].base + "/cpuset.cpus"));
      all_cpus_ = Trim(all);
    }
    return all_cpus_;
  }

  // A fresh blkio cgroup's limits (blkio cgroups are never reused, so no
  // earlier task's limits linger): the throttles on the device, and the
  // weight (BFQ's, 1 to 1000, clamped) where the kernel has one.
  static Status WriteIoLimits(const std::string& dir, const CageSpec& spec) {
    const core::IoLimits& io = spec.io;
    if (io.read_bps != 0) {
      RETURN_IF_ERROR(WriteCgroupFile(dir + "/blkio.throttle.read_bps_device",
                                      spec.io_device + " " + std::to_string(io.read_bps)));
    }
    if (io.write_bps != 0) {
      RETURN_IF_ERROR(WriteCgroupFile(dir + "/blkio.throttle.write_bps_device",
                                      spec.io_device + " " + std::to_string(io.write_bps)));
    }
    if (io.weight != 0) {
      const std::string weight = std::to_string(std::clamp<uint32_t>(io.weight, 1, 1000));
      for (const char* file : {"/blkio.bfq.weight", "/blkio.weight"}) {
        if (access((dir + file).c_str(), F_OK) == 0) return WriteCgroupFile(dir + file, weight);
      }
      return FailedPrecondition(
          "io_weight: this worker's cgroup v1 blkio controller has no weight (the kernel's I/O "
          "scheduler is not BFQ); io_read_bps and io_write_bps work");
    }
    return Status::Ok();
  }

  Hierarchy h_[kCtlCount];
  std::string mems_;
  int gpu_count_;
  std::string blkio_mount_;
  std::string all_cpus_;  // AllCpus, read once
  std::shared_ptr<Pool> pool_ = std::make_shared<Pool>();
};

Result<Hierarchy> Prepare(const std::string& mounts, const std::string& controller, bool required) {
  ASSIGN_OR_RETURN(std::optional<std::string> base, PrepareV1Base(mounts, controller, required));
  Hierarchy h;
  h.present = base.has_value();
  if (base) h.base = std::move(*base);
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
  ASSIGN_OR_RETURN(Hierarchy blkio, Prepare(options.mounts, "blkio", false));
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
      std::move(freezer), std::move(devices), std::move(blkio), std::move(mems), options.gpu_count,
      options.mounts + "/blkio"));
}

}  // namespace drover::worker
