// QuotaReport: the users' and groups' quota limits beside what they hold
// now, as Scheduler::Quotas gives it (GET /api/v1/quotas, `drover quota`).
//
// Thread safety: plain values.
#ifndef DROVER_CORE_QUOTA_REPORT_H_
#define DROVER_CORE_QUOTA_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace drover::core {

// What a user's (or a group's members') attempts hold and wait with.
struct QuotaUse {
  int64_t cpus_milli = 0;
  int64_t gpus = 0;  // hundredths
  uint64_t mem_bytes = 0;
  uint32_t tasks = 0;   // assigned or running
  uint64_t queued = 0;  // waiting or queued (not yet assigned)
};

struct QuotaLine {
  std::string name;
  // Its limits (a user without a line of its own: the default's); the
  // struct is UserQuota's fields, copied so that this header stays small.
  int64_t max_cpus_milli = 0;
  int64_t max_gpus = 0;
  uint64_t max_mem_bytes = 0;
  uint32_t max_tasks = 0;
  uint64_t max_queued = 0;
  bool own = true;  // a user: false when its limits are the default's ("*")
  QuotaUse use;
  // A user: the groups it belongs to; a group: its members.
  std::vector<std::string> related;
};

struct QuotaReport {
  // Every user with a line of its own, or holding or queuing anything now;
  // by name.
  std::vector<QuotaLine> users;
  std::vector<QuotaLine> groups;  // every group of the policy, by name
};

}  // namespace drover::core

#endif  // DROVER_CORE_QUOTA_REPORT_H_
