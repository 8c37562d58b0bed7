#include "worker/state/agent_convert.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "common/quantity.h"

namespace drover::worker {

Result<ServerAddress> ParseServerAddress(std::string_view text) {
  ServerAddress address;
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("server address \"" + std::string(text) + "\": missing ']'");
    }
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return InvalidArgument("server address \"" + std::string(text) +
                               "\": expected ':' after ']'");
      }
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) {
    return InvalidArgument("server address \"" + std::string(text) +
                           "\": expected host:port, e.g. 10.0.0.5:7210");
  }
  address.host = std::string(host);
  if (!port.empty() || text.find(':') != std::string_view::npos) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("server address \"" + std::string(text) +
                             "\": port must be a number in 1..65535");
    }
    address.port = static_cast<uint16_t>(value);
  }
  return address;
}

core::WorkerResources ToCoreResources(const WorkerResources& detected, const std::string& name) {
  core::WorkerResources out;
  out.name = name;
  for (int core : detected.cpu_ids) out.cpu_cores.push_back(static_cast<uint32_t>(core));
  out.mem_bytes = detected.memory_bytes;
  for (const GpuInfo& gpu : detected.gpus) {
    out.gpus.push_back(core::GpuDevice{static_cast<uint32_t>(gpu.index), gpu.uuid, gpu.name,
                                       gpu.memory_bytes});
  }
  out.counters = detected.counters;
  out.labels = detected.labels;
  return out;
}

core::WorkerUtilization ToCoreUtilization(const Utilization& sample) {
  core::WorkerUtilization out;
  const double cpu = std::clamp(sample.cpu_percent, 0.0, 100.0);
  out.cpu_percent = static_cast<uint32_t>(std::lround(cpu));
  out.mem_used_bytes = sample.memory_used_bytes;
  for (const GpuSample& gpu : sample.gpus) {
    core::GpuUtilization g;
    g.index = static_cast<uint32_t>(gpu.index);
    g.util_percent = static_cast<uint32_t>(std::max(0, gpu.utilization_percent.value_or(0)));
    g.mem_used_bytes = gpu.memory_used_bytes.value_or(0);
    out.gpus.push_back(g);
  }
  return out;
}

[[gnu::hot]] SlotRequest ToSlotRequest(const proto::Assignment& assignment) {
  SlotRequest request;
  request.milli_cpus = assignment.cpu_quota_milli;
  for (uint32_t core : assignment.cores) request.cores.push_back(static_cast<int>(core));
  request.memory_bytes = assignment.mem_limit_bytes;
  for (const core::GpuGrant& grant : assignment.gpus) {
    request.gpus.push_back(GpuShare{static_cast<int>(grant.index), grant.share});
  }
  return request;
}

[[gnu::hot]] TaskSpec ToTaskSpec(const proto::Assignment& assignment) {
  TaskSpec spec;
  spec.id = assignment.task;
  spec.attempt = assignment.attempt;
  spec.task_index = assignment.array_index;
  spec.argv = assignment.argv;
  spec.user = assignment.user;
  spec.env.assign(assignment.env.begin(), assignment.env.end());
  spec.milli_cpus = assignment.cpu_quota_milli;
  spec.memory_bytes = assignment.mem_limit_bytes;
  for (uint32_t core : assignment.cores) spec.cores.push_back(static_cast<int>(core));
  for (const core::GpuGrant& grant : assignment.gpus) {
    spec.gpus.push_back(static_cast<int>(grant.index));
  }
  spec.private_network = assignment.private_network;
  spec.io = assignment.io;
  spec.disk_bytes = assignment.disk_bytes;
  spec.image = assignment.image;
  spec.image_pull = assignment.image_pull;
  return spec;
}

core::TaskOutcome ToOutcome(const TaskResult& result) {
  // A process made ahead whose execve failed: reported as a start that
  // failed ("command not found: x"), as when Start itself fails.
  if (!result.start_error.empty()) return FailureOutcome(result.start_error);
  core::TaskOutcome out;
  out.exit_code = result.signal != 0 ? -1 : result.exit_code;
  out.signal = result.signal;
  out.oom_killed = result.oom_killed;
  out.usage.wall = result.wall;
  out.usage.cpu = result.cpu;
  out.usage.peak_mem_bytes = result.peak_memory;
  out.usage.io_read_bytes = result.io_read_bytes;
  out.usage.io_write_bytes = result.io_write_bytes;
  out.result = result.result_text;
  out.reason = result.disk_error;
  out.image_digest = result.image_digest;
  if (result.stopped_for_disk) {
    // No exit status of the program's own: the reason says why it ended
    // ("disk: 21.3 GiB written under its directory, more than disk 20 GiB").
    out.exit_code = -1;
    out.signal = 0;
  }
  if (out.result.size() > core::kMaxResultBytes) {
    // The executor reads up to its own cap and appends a note when the file
    // was longer; cutting the text to the protocol's limit here must keep a
    // note, or a cut result would look whole.
    static const std::string kNote =
        "\n[drover: result truncated at " + FormatBytes(core::kMaxResultBytes) + "]\n";
    out.result.resize(core::kMaxResultBytes - kNote.size());
    out.result += kNote;
  }
  return out;
}

core::TaskOutcome FailureOutcome(std::string reason, int exit_code, int signal) {
  core::TaskOutcome out;
  out.exit_code = exit_code;
  out.signal = signal;
  out.reason = std::move(reason);
  if (out.reason.size() > core::kMaxResultBytes) out.reason.resize(core::kMaxResultBytes);
  return out;
}

}  // namespace drover::worker
