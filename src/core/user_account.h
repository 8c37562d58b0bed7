// UserAccount: one user's quota (SchedulerConfig::quotas) and what that
// user's assigned and running attempts hold against it. The quota's one
// check, Exceeds, serves placement (a task over quota is parked), unparking
// (how many parked tasks the freed room takes back) and explanations
// ("quota: user u1 at 8/8 gpus").
//
// Invariants: `used()` is the sum over the user's attempts that hold an
// Active slot (Take when the slot is claimed, Give when it ends), so it is
// never negative and is zero when the user holds nothing. A limit of 0 is
// no limit. GPUs count only for requests that ask for some.
//
// Thread safety: none; owned by the scheduler's State.
#ifndef DROVER_CORE_USER_ACCOUNT_H_
#define DROVER_CORE_USER_ACCOUNT_H_

#include <cstdint>
#include <string>

#include "core/resources.h"
#include "core/scheduler.h"

namespace drover::core {

// What a user's attempts hold at once.
struct QuotaUsage {
  int64_t cpus_milli = 0;
  int64_t gpus = 0;  // hundredths
  uint32_t tasks = 0;
  void Add(const ResourceRequest& req) {
    cpus_milli += req.cpus_milli;
    gpus += req.gpus;
    ++tasks;
  }
  void Remove(const ResourceRequest& req) {
    cpus_milli -= req.cpus_milli;
    gpus -= req.gpus;
    --tasks;
  }
};

// The limit a request would pass.
enum class QuotaLimit : uint8_t { kNone, kGpus, kCpus, kTasks };

class UserAccount {
 public:
  UserAccount(std::string name, UserQuota quota) : name_(std::move(name)), quota_(quota) {}

  // The first limit (GPUs, then CPUs, then tasks) that one more attempt
  // asking `req` would pass on top of `usage`; kNone when it fits.
  QuotaLimit Exceeds(const ResourceRequest& req, const QuotaUsage& usage) const {
    if (quota_.max_gpus != 0 && req.gpus > 0 && usage.gpus + req.gpus > quota_.max_gpus) {
      return QuotaLimit::kGpus;
    }
    if (quota_.max_cpus_milli != 0 &&
        usage.cpus_milli + req.cpus_milli > quota_.max_cpus_milli) {
      return QuotaLimit::kCpus;
    }
    if (quota_.max_tasks != 0 && usage.tasks + 1 > quota_.max_tasks) return QuotaLimit::kTasks;
    return QuotaLimit::kNone;
  }
  QuotaLimit Exceeds(const ResourceRequest& req) const { return Exceeds(req, used_); }

  void Take(const ResourceRequest& req) { used_.Add(req); }
  void Give(const ResourceRequest& req) { used_.Remove(req); }

  // "quota: user u1 at 8/8 gpus" for a limit Exceeds gave (not kNone).
  std::string Explain(QuotaLimit limit) const;

  const std::string& name() const { return name_; }
  const UserQuota& quota() const { return quota_; }
  const QuotaUsage& used() const { return used_; }

 private:
  std::string name_;
  UserQuota quota_;
  QuotaUsage used_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_USER_ACCOUNT_H_
