#include "worker/exec/rlimit.h"

#include <sys/resource.h>

namespace drover::worker {
namespace {

class RlimitCage final : public TaskCage {
 public:
  explicit RlimitCage(const CageSpec& spec) {
    if (spec.memory_bytes > 0) {
      rlimits_.push_back({RLIMIT_DATA, spec.memory_bytes, spec.memory_bytes});
      memory_limit_ = spec.memory_bytes;
    }
    if (spec.max_pids > 0) {
      auto n = static_cast<rlim_t>(spec.max_pids);
      rlimits_.push_back({RLIMIT_NPROC, n, n});
    }
  }
  bool contains_tree() const override { return false; }
  Result<std::vector<UniqueFd>> KillAll() override { return std::vector<UniqueFd>(); }
  CageUsage Usage() override { return {}; }
  Status Remove() override { return Status::Ok(); }
};

class RlimitIsolator final : public Isolator {
 public:
  IsolationMode mode() const override { return IsolationMode::kRlimit; }
  Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) override {
    if (spec.io.Any() || spec.container) {
      return FailedPrecondition(std::string(spec.container ? "containers" : "disk I/O limits") +
                                " need cgroups; this worker's isolation is rlimit");
    }
    return std::unique_ptr<TaskCage>(new RlimitCage(spec));
  }
};

}  // namespace

std::unique_ptr<Isolator> MakeRlimitIsolator() { return std::make_unique<RlimitIsolator>(); }

}  // namespace drover::worker
