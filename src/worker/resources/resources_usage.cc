#include "worker/resources/resources_usage.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "common/proc_stat.h"
#include "worker/resources/resources_cgroup.h"
#include "worker/resources/resources_host.h"

namespace drover::worker {

UtilizationSampler::UtilizationSampler(SamplerConfig config, std::unique_ptr<GpuSource> gpus)
    : config_(std::move(config)), gpus_(std::move(gpus)) {
  Result<CpuTimes> now = ReadCpuTimes();
  if (now.ok()) previous_ = *now;
}

Result<UtilizationSampler::CpuTimes> UtilizationSampler::ReadCpuTimes() const {
  const std::string path = config_.proc_root + "/stat";
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  CpuTimes sum;
  size_t matched = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.starts_with("cpu")) continue;
    size_t space = line.find(' ');
    std::string_view label = line.substr(3, space == std::string_view::npos ? 0 : space - 3);
    if (config_.cpu_ids.empty()) {
      if (!label.empty()) continue;
    } else {
      int id = -1;
      auto [p, ec] = std::from_chars(label.data(), label.data() + label.size(), id);
      if (label.empty() || ec != std::errc() ||
          !std::binary_search(config_.cpu_ids.begin(), config_.cpu_ids.end(), id)) {
        continue;
      }
    }
    std::string_view fields = line.substr(std::min(line.size(), space));
    CpuStatJiffies jiffies;
    if (!AddCpuStatFields(fields, jiffies)) {
      return DataLoss(path + ": malformed line \"" + std::string(line) + "\"");
    }
    sum.busy += jiffies.busy;
    sum.total += jiffies.total;
    ++matched;
  }
  if (matched == 0) return DataLoss(path + ": no cpu line for the worker's cores");
  return sum;
}

Result<Utilization> UtilizationSampler::SampleUtilization() {
  Utilization u;
  ASSIGN_OR_RETURN(CpuTimes now, ReadCpuTimes());
  // Counters only grow; a smaller value (a core went offline) restarts the
  // baseline rather than producing a negative share.
  if (now.total > previous_.total && now.busy >= previous_.busy) {
    u.cpu_percent = 100.0 * static_cast<double>(now.busy - previous_.busy) /
                    static_cast<double>(now.total - previous_.total);
    u.cpu_percent = std::min(100.0, u.cpu_percent);
  }
  previous_ = now;

  if (!config_.memory_cgroup_dir.empty()) {
    ASSIGN_OR_RETURN(u.memory_used_bytes, ReadCgroupMemoryUsage(config_.memory_cgroup_dir,
                                                                config_.memory_cgroup_version));
  } else {
    ASSIGN_OR_RETURN(HostMemory mem, ReadHostMemory(config_.proc_root));
    u.memory_used_bytes = mem.total_bytes - std::min(mem.total_bytes, mem.available_bytes);
  }

  if (gpus_) {
    Result<std::vector<GpuSample>> samples = gpus_->Sample();
    if (samples.ok()) {
      u.gpus = std::move(*samples);
    } else {
      u.gpu_error = std::string(gpus_->name()) + ": " + samples.status().message();
    }
  }
  return u;
}

}  // namespace drover::worker
