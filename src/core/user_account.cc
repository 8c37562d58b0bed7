#include "core/user_account.h"

#include "common/quantity.h"

namespace drover::core {

QuotaLimit FirstLimitPassed(const UserQuota& quota, const ResourceRequest& req,
                            const QuotaUsage& usage) {
  if (quota.max_gpus != 0 && req.gpus > 0 && usage.gpus + req.gpus > quota.max_gpus) {
    return QuotaLimit::kGpus;
  }
  if (quota.max_cpus_milli != 0 && req.cpus_milli > 0 &&
      usage.cpus_milli + req.cpus_milli > quota.max_cpus_milli) {
    return QuotaLimit::kCpus;
  }
  if (quota.max_mem_bytes != 0 && req.mem_bytes > 0 &&
      usage.mem_bytes + req.mem_bytes > quota.max_mem_bytes) {
    return QuotaLimit::kMemory;
  }
  if (quota.max_tasks != 0 && usage.tasks + 1 > quota.max_tasks) return QuotaLimit::kTasks;
  return QuotaLimit::kNone;
}

std::string DescribeUse(QuotaLimit limit, const UserQuota& quota, const QuotaUsage& usage) {
  switch (limit) {
    case QuotaLimit::kGpus:
      return "gpus " + FormatGpus(usage.gpus) + "/" + FormatGpus(quota.max_gpus);
    case QuotaLimit::kCpus:
      return "cpus " + FormatCpus(usage.cpus_milli) + "/" + FormatCpus(quota.max_cpus_milli);
    case QuotaLimit::kMemory:
      return "memory " + FormatBytes(usage.mem_bytes) + "/" + FormatBytes(quota.max_mem_bytes);
    case QuotaLimit::kTasks:
      return "tasks " + std::to_string(usage.tasks) + "/" + std::to_string(quota.max_tasks);
    case QuotaLimit::kNone:
      break;
  }
  return "none";
}

namespace {

// `group` as it would be if the user held `usage` instead of `used`.
QuotaUsage Projected(const QuotaUsage& group, const QuotaUsage& used, const QuotaUsage& usage) {
  QuotaUsage out = group;
  out.cpus_milli += usage.cpus_milli - used.cpus_milli;
  out.gpus += usage.gpus - used.gpus;
  out.mem_bytes = out.mem_bytes + usage.mem_bytes - used.mem_bytes;  // never below zero
  out.tasks = out.tasks + usage.tasks - used.tasks;
  return out;
}

}  // namespace

QuotaLimit UserAccount::Exceeds(const ResourceRequest& req, const QuotaUsage& usage) const {
  if (QuotaLimit own = FirstLimitPassed(quota_, req, usage); own != QuotaLimit::kNone) return own;
  for (const auto& g : groups_) {
    QuotaLimit limit = FirstLimitPassed(g->quota, req, Projected(g->used, used_, usage));
    if (limit != QuotaLimit::kNone) return limit;
  }
  return QuotaLimit::kNone;
}

void UserAccount::Take(const ResourceRequest& req) {
  used_.Add(req);
  for (const auto& g : groups_) g->used.Add(req);
}

void UserAccount::Give(const ResourceRequest& req) {
  used_.Remove(req);
  for (const auto& g : groups_) g->used.Remove(req);
}

std::string UserAccount::Explain(const ResourceRequest& req) const {
  if (QuotaLimit own = FirstLimitPassed(quota_, req, used_); own != QuotaLimit::kNone) {
    return "quota: " + DescribeUse(own, quota_, used_) + " for " + name_;
  }
  for (const auto& g : groups_) {
    QuotaLimit limit = FirstLimitPassed(g->quota, req, g->used);
    if (limit != QuotaLimit::kNone) {
      return "quota: " + DescribeUse(limit, g->quota, g->used) + " for group " + g->name + " (" +
             name_ + ")";
    }
  }
  return "quota: waiting for room in " + name_ + "'s quota";
}

void UserAccount::AddQueued(int64_t n) {
  queued_ += n;
  for (const auto& g : groups_) g->queued += n;
}

Status UserAccount::AdmitQueued(uint64_t n) const {
  const auto over = [n](uint64_t limit, int64_t queued) {
    return limit != 0 && static_cast<uint64_t>(queued) + n > limit;
  };
  const std::string adds = "this job adds " + std::to_string(n);
  if (over(quota_.max_queued, queued_)) {
    return ResourceExhausted("quota: queued tasks " + std::to_string(queued_) + "/" +
                             std::to_string(quota_.max_queued) + " for " + name_ + " (" + adds +
                             ")");
  }
  for (const auto& g : groups_) {
    if (over(g->quota.max_queued, g->queued)) {
      return ResourceExhausted("quota: queued tasks " + std::to_string(g->queued) + "/" +
                               std::to_string(g->quota.max_queued) + " for group " + g->name +
                               " (" + name_ + "; " + adds + ")");
    }
  }
  return Status::Ok();
}

}  // namespace drover::core
