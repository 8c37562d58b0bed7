#include "worker/resources/resources.h"

#include <algorithm>
#include <utility>

#include "common/quantity.h"
#include "worker/resources/gpu_detect.h"
#include "worker/resources/resources_cgroup.h"
#include "worker/resources/resources_host.h"
#include "worker/resources/resources_labels.h"

namespace drover::worker {
namespace {

Status DetectCpus(const DetectOptions& options, const CgroupLimits& limits, WorkerResources* r) {
  ASSIGN_OR_RETURN(std::vector<int> affinity, ReadAffinity());
  r->cpu_ids = affinity;
  if (!options.cpus.empty()) {
    Result<std::vector<int>> wanted = ParseCpuList(options.cpus);
    if (!wanted.ok()) return wanted.status().WithContext("--cpus");
    for (int id : *wanted) {
      if (!std::binary_search(affinity.begin(), affinity.end(), id)) {
        return FailedPrecondition("--cpus " + options.cpus + ": core " + std::to_string(id) +
                                  " is not in this process's affinity mask (" +
                                  FormatCpuList(affinity) + ")");
      }
    }
    r->cpu_ids = std::move(*wanted);
  }
  r->cpu_milli = static_cast<int64_t>(r->cpu_ids.size()) * 1000;
  if (limits.cpu_quota_milli && *limits.cpu_quota_milli < r->cpu_milli) {
    r->cpu_quota_milli = limits.cpu_quota_milli;
    r->cpu_milli = *limits.cpu_quota_milli;
    r->notes.push_back("cgroup CPU quota limits the worker to " +
                       FormatCpus(*limits.cpu_quota_milli) + " cpus");
  }
  return Status::Ok();
}

Status DetectMemory(const DetectOptions& options, const CgroupLimits& limits, WorkerResources* r) {
  ASSIGN_OR_RETURN(HostMemory host, ReadHostMemory(options.proc_root));
  r->host_memory_bytes = host.total_bytes;
  r->memory_bytes = host.total_bytes;
  if (limits.memory_limit_bytes && *limits.memory_limit_bytes < host.total_bytes) {
    r->memory_limit_bytes = limits.memory_limit_bytes;
    r->memory_bytes = *limits.memory_limit_bytes;
    r->notes.push_back("cgroup memory limit " + FormatBytes(*limits.memory_limit_bytes) +
                       " (host has " + FormatBytes(host.total_bytes) + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<WorkerResources> DetectResources(const DetectOptions& options,
                                        std::unique_ptr<UtilizationSampler>* sampler) {
  WorkerResources r;
  // Flag values first: a typo should fail before any slow probing.
  ASSIGN_OR_RETURN(std::vector<GpuInfo> manual_gpus,
                   ParseManualGpus(options.gpus, options.gpu_type, options.gpu_mem));
  r.labels = DefaultLabels();
  RETURN_IF_ERROR(AddLabels(options.labels, &r.labels));
  ASSIGN_OR_RETURN(r.counters, ParseCounters(options.counters));
  r.hostname = options.hostname.empty() ? ReadHostname() : options.hostname;

  ASSIGN_OR_RETURN(CgroupLimits limits, ReadCgroupLimits(options.proc_root, options.sys_root));
  RETURN_IF_ERROR(DetectCpus(options, limits, &r));
  RETURN_IF_ERROR(DetectMemory(options, limits, &r));

  std::unique_ptr<GpuSource> gpu_sampler;
  if (!options.gpus.empty()) {
    r.gpus = std::move(manual_gpus);
    r.gpu_source = r.gpus.empty() ? "none" : "manual";
  } else {
    GpuDetectOptions gpu_options;
    gpu_options.nvml_library = options.nvml_library;
    gpu_options.nvidia_smi = options.nvidia_smi;
    gpu_options.nvidia_smi_timeout = options.nvidia_smi_timeout;
    ASSIGN_OR_RETURN(GpuDetection found, DetectGpus(gpu_options));
    r.gpus = std::move(found.gpus);
    if (options.gpu_parts < 1 || options.gpu_part < 0 || options.gpu_part >= options.gpu_parts) {
      return InvalidArgument("GPU share " + std::to_string(options.gpu_part) + " of " +
                             std::to_string(options.gpu_parts) + " does not exist");
    }
    if (options.gpu_parts > 1) {
      const size_t n = r.gpus.size(), parts = static_cast<size_t>(options.gpu_parts);
      const size_t part = static_cast<size_t>(options.gpu_part);
      const size_t base = n / parts, extra = n % parts;
      const size_t begin = part * base + std::min(part, extra);
      const size_t end = begin + base + (part < extra ? 1 : 0);
      r.gpus = std::vector<GpuInfo>(r.gpus.begin() + static_cast<std::ptrdiff_t>(begin),
                                    r.gpus.begin() + static_cast<std::ptrdiff_t>(end));
    }
    r.gpu_source = found.source;
    r.notes.insert(r.notes.end(), found.notes.begin(), found.notes.end());
    gpu_sampler = std::move(found.sampler);
  }

  if (sampler != nullptr) {
    SamplerConfig config;
    config.proc_root = options.proc_root;
    config.cpu_ids = r.cpu_ids;
    if (r.memory_limit_bytes) {
      config.memory_cgroup_dir = limits.memory_dir;
      config.memory_cgroup_version = limits.memory_version;
    }
    *sampler = std::make_unique<UtilizationSampler>(std::move(config), std::move(gpu_sampler));
  }
  return r;
}

std::string FormatSummary(const WorkerResources& r) {
  std::string out = std::to_string(r.cpu_ids.size()) + (r.cpu_ids.size() == 1 ? " core" : " cores");
  if (r.cpu_quota_milli) out += " (quota " + FormatCpus(*r.cpu_quota_milli) + ")";
  out += ", " + FormatBytes(r.memory_bytes);
  if (r.gpus.empty()) return out + ", no GPU";
  // Group equal models, in order of first appearance: "2x A100 80 GiB + 1x T4 15 GiB".
  std::vector<std::pair<std::string, int>> groups;
  for (const GpuInfo& gpu : r.gpus) {
    std::string label = ShortGpuName(gpu.name);
    if (gpu.memory_bytes > 0) label += " " + FormatBytes(gpu.memory_bytes);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == label; });
    if (it == groups.end()) {
      groups.emplace_back(label, 1);
    } else {
      ++it->second;
    }
  }
  out += ", ";
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) out += " + ";
    out += std::to_string(groups[i].second) + "x " + groups[i].first;
  }
  return out;
}

}  // namespace drover::worker
