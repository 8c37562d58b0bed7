#include "core/user_account.h"

#include "common/quantity.h"

namespace drover::core {

std::string UserAccount::Explain(QuotaLimit limit) const {
  const std::string who = "quota: user " + name_ + " at ";
  switch (limit) {
    case QuotaLimit::kGpus:
      return who + FormatGpus(used_.gpus) + "/" + FormatGpus(quota_.max_gpus) + " gpus";
    case QuotaLimit::kCpus:
      return who + FormatCpus(used_.cpus_milli) + "/" + FormatCpus(quota_.max_cpus_milli) +
             " cpus";
    case QuotaLimit::kTasks:
      return who + std::to_string(used_.tasks) + "/" + std::to_string(quota_.max_tasks) + " tasks";
    case QuotaLimit::kNone:
      break;
  }
  return who + "its quota";
}

}  // namespace drover::core
