// UserAccount: one user's quota (UserPolicy::quotas, or its default) and
// what that user's assigned and running attempts hold against it, with the
// accounts of the groups the user belongs to (UserPolicy::groups), whose
// quotas bound their members together. The one check, Exceeds, serves
// placement (a task over quota is parked), unparking (how many parked tasks
// the freed room takes back) and explanations (Explain: "quota: gpus 2/2
// for ana", "quota: gpus 4/4 for group vision (ana)").
//
// Invariants: `used()` is the sum over the user's attempts that hold an
// Active slot (Take when the slot is claimed, Give when it ends), so it is
// never negative and is zero when the user holds nothing; a group's `used`
// is the sum of its members' (Take and Give charge both), and its `queued`
// the sum of its members' queued tasks. A limit of 0 is no limit. A
// resource counts against a limit only for requests that ask for some: a
// CPU-only task is not held back by a GPU limit, even one lowered below
// what the user holds.
//
// Thread safety: none; owned by the scheduler's State.
#ifndef DROVER_CORE_USER_ACCOUNT_H_
#define DROVER_CORE_USER_ACCOUNT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/resources.h"
#include "core/scheduler.h"

namespace drover::core {

// What attempts hold at once.
struct QuotaUsage {
  int64_t cpus_milli = 0;
  int64_t gpus = 0;  // hundredths
  uint64_t mem_bytes = 0;
  uint32_t tasks = 0;
  void Add(const ResourceRequest& req) {
    cpus_milli += req.cpus_milli;
    gpus += req.gpus;
    mem_bytes += req.mem_bytes;
    ++tasks;
  }
  void Remove(const ResourceRequest& req) {
    cpus_milli -= req.cpus_milli;
    gpus -= req.gpus;
    mem_bytes -= req.mem_bytes;
    --tasks;
  }
};

// The limit a request would pass.
enum class QuotaLimit : uint8_t { kNone, kGpus, kCpus, kMemory, kTasks };

// The first limit of `quota` (GPUs, CPUs, memory, then tasks) that one more
// attempt asking `req` passes on top of `usage`; kNone when it fits.
QuotaLimit FirstLimitPassed(const UserQuota& quota, const ResourceRequest& req,
                            const QuotaUsage& usage);

// "gpus 2/2", "cpus 8/8", "memory 64 GiB/64 GiB", "tasks 10/10": `usage`
// against `quota` on `limit` (not kNone), GPUs as whole numbers when whole.
std::string DescribeUse(QuotaLimit limit, const UserQuota& quota, const QuotaUsage& usage);

// A group's quota and what its members hold together (shared by the
// members' accounts and State::group_accounts).
struct GroupAccount {
  std::string name;
  UserQuota quota;
  QuotaUsage used;
  int64_t queued = 0;  // its members' queued tasks
};

class UserAccount {
 public:
  UserAccount(std::string name, UserQuota quota,
              std::vector<std::shared_ptr<GroupAccount>> groups = {})
      : name_(std::move(name)), quota_(quota), groups_(std::move(groups)) {}

  // The first limit one more attempt asking `req` would pass: the user's
  // own (GPUs, CPUs, memory, tasks), then each group's in turn. `usage` is
  // what the user would hold (used() plus tasks being taken back by
  // Unpark); each group is charged the same difference over its own use.
  QuotaLimit Exceeds(const ResourceRequest& req, const QuotaUsage& usage) const;
  QuotaLimit Exceeds(const ResourceRequest& req) const { return Exceeds(req, used_); }

  // Charges (Take) or credits (Give) the user and each of its groups.
  void Take(const ResourceRequest& req);
  void Give(const ResourceRequest& req);

  // Why one more attempt asking `req` does not fit now: "quota: gpus 2/2
  // for ana", or "quota: gpus 4/4 for group vision (ana)" when a group's
  // limit is the one passed; "quota: waiting for room in ana's quota" when
  // it fits again (a parked task about to be taken back).
  std::string Explain(const ResourceRequest& req) const;

  // Queued tasks: submitted and not yet assigned (waiting or queued). A
  // job's tasks are added when it is accepted and taken off as they leave
  // those states; the groups follow.
  void AddQueued(int64_t n);
  int64_t queued() const { return queued_; }
  // OK when `n` more queued tasks stay within the user's and its groups'
  // max_queued; otherwise kResourceExhausted: "quota: queued tasks 100/100
  // for ana (this job adds 5)", or "... for group vision (ana; this job
  // adds 5)".
  Status AdmitQueued(uint64_t n) const;

  // A policy reload: the user's quota and groups are replaced; the caller
  // rebuilds the groups' use from their members (ApplyUserPolicy, quotas_ops.h).
  void Reset(UserQuota quota, std::vector<std::shared_ptr<GroupAccount>> groups) {
    quota_ = quota;
    groups_ = std::move(groups);
  }

  const std::string& name() const { return name_; }
  const UserQuota& quota() const { return quota_; }
  const QuotaUsage& used() const { return used_; }
  const std::vector<std::shared_ptr<GroupAccount>>& groups() const { return groups_; }

 private:
  std::string name_;
  UserQuota quota_;
  QuotaUsage used_;
  int64_t queued_ = 0;
  std::vector<std::shared_ptr<GroupAccount>> groups_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_USER_ACCOUNT_H_
