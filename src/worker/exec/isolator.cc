#include "worker/exec/isolator.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/cgroup_v1.h"
#include "worker/exec/cgroup_v2.h"
#include "worker/exec/rlimit.h"

namespace drover::worker {

TaskCage::~TaskCage() { CloseJoinFds(); }

void TaskCage::CloseJoinFds() {
  if (owns_join_fds_) {
    for (int fd : join_fds_) close(fd);
  }
  join_fds_.clear();
}

Status TaskCage::Adopt(pid_t pid) {
  const std::string text = std::to_string(pid);
  for (int fd : join_fds_) {
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      return Unavailable("cannot move process " + text + " into its task's cgroup: " +
                         strerror(errno));
    }
  }
  return Status::Ok();
}

Result<IsolationMode> ParseIsolationMode(std::string_view text) {
  if (text == "auto") return IsolationMode::kAuto;
  if (text == "cgroup2") return IsolationMode::kCgroup2;
  if (text == "cgroup1") return IsolationMode::kCgroup1;
  if (text == "rlimit") return IsolationMode::kRlimit;
  if (text == "none") return IsolationMode::kNone;
  return InvalidArgument("unknown isolation \"" + std::string(text) +
                         "\": expected auto, cgroup2, cgroup1, rlimit or none");
}

std::string_view IsolationModeName(IsolationMode mode) {
  switch (mode) {
    case IsolationMode::kAuto:
      return "auto";
    case IsolationMode::kCgroup2:
      return "cgroup2";
    case IsolationMode::kCgroup1:
      return "cgroup1";
    case IsolationMode::kRlimit:
      return "rlimit";
    case IsolationMode::kNone:
      return "none";
  }
  return "unknown";
}

namespace {

class NoCage final : public TaskCage {
 public:
  bool contains_tree() const override { return false; }
  Result<std::vector<UniqueFd>> KillAll() override { return std::vector<UniqueFd>(); }
  CageUsage Usage() override { return {}; }
  Status Remove() override { return Status::Ok(); }
};

class NoIsolator final : public Isolator {
 public:
  IsolationMode mode() const override { return IsolationMode::kNone; }
  Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) override {
    if (spec.io.Any() || spec.container) {
      return FailedPrecondition(std::string(spec.container ? "containers" : "disk I/O limits") +
                                " need cgroups; this worker's isolation is none");
    }
    return std::unique_ptr<TaskCage>(new NoCage());
  }
};

Result<std::unique_ptr<Isolator>> MakeV2(const IsolatorOptions& options) {
  std::string root = options.cgroup2_root;
  if (root.empty()) {
    ASSIGN_OR_RETURN(root, DefaultCgroupV2Root(options.cgroup2_mount));
    // The default root is a child of the worker's parent cgroup, which must
    // hand the controllers down to it.
    std::string parent = root.substr(0, root.rfind('/'));
    Status s = WriteCgroupFile(parent + "/cgroup.subtree_control", "+memory +cpu +pids");
    (void)s;  // MakeCgroupV2Isolator reports what is missing
    Status io = WriteCgroupFile(parent + "/cgroup.subtree_control", "+io");
    (void)io;  // optional: only tasks with disk I/O limits need it
    bool existed = access(root.c_str(), F_OK) == 0;
    RETURN_IF_ERROR(MakeDir(root));
    auto isolator = MakeCgroupV2Isolator(root);
    if (!isolator.ok() && !existed) rmdir(root.c_str());
    return isolator;
  }
  return MakeCgroupV2Isolator(root);
}

}  // namespace

std::unique_ptr<Isolator> MakeNoIsolator() { return std::make_unique<NoIsolator>(); }

Result<std::unique_ptr<Isolator>> MakeIsolator(const IsolatorOptions& options) {
  CgroupV1Options v1{options.cgroup1_mounts, options.gpu_count};
  switch (options.mode) {
    case IsolationMode::kNone:
      return MakeNoIsolator();
    case IsolationMode::kRlimit:
      return MakeRlimitIsolator();
    case IsolationMode::kCgroup1:
      return MakeCgroupV1Isolator(v1);
    case IsolationMode::kCgroup2:
      return MakeV2(options);
    case IsolationMode::kAuto: {
      if (auto v2 = MakeV2(options); v2.ok()) return v2;
      if (auto c1 = MakeCgroupV1Isolator(v1); c1.ok()) return c1;
      return MakeRlimitIsolator();
    }
  }
  return InvalidArgument("unknown isolation mode");
}

}  // namespace drover::worker
