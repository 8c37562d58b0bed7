// The worker's health checks (health_monitor.h).
#include "worker/agent/health_monitor.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/quantity.h"
#include "common/run_program.h"
#include "worker/resources/nvml.h"

namespace drover::worker {

std::string DiskTrouble(const std::string& dir, uint64_t min_free_bytes) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return "";
  if ((fs.f_flag & ST_RDONLY) != 0) {
    return "the work directory's file system is read-only (" + dir + ")";
  }
  const uint64_t size = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const uint64_t floor = min_free_bytes > 0 ? min_free_bytes : std::min<uint64_t>(1ull << 30, size / 100);
  if (free < floor) {
    return "the work directory's file system has " + FormatBytes(free) + " free, below " +
           FormatBytes(floor) + " (" + dir + ")";
  }
  return "";
}

std::string ProgramTrouble(const std::string& program, Duration timeout) {
  Result<ProgramRun> run = RunProgramToEnd({"/bin/sh", "-c", program}, timeout);
  if (!run.ok()) {
    if (run.status().code() == StatusCode::kDeadlineExceeded) {
      return "the health check did not finish within " + FormatDuration(timeout) + " (" +
             program + ")";
    }
    return "the health check could not run: " + run.status().message();
  }
  if (run->ok()) return "";
  std::string said = run->FirstLine();
  // A reason, not a log: it rides every heartbeat and shows in a table.
  if (said.size() > kMaxReasonBytes) said = said.substr(0, kMaxReasonBytes) + "...";
  while (!said.empty() && (said.back() == ' ' || said.back() == '\t' || said.back() == '\r')) {
    said.pop_back();
  }
  return said.empty() ? "the health check " + run->How() + " (" + program + ")" : said;
}

HealthMonitor::HealthMonitor(HealthOptions options, net::EventLoop& loop, Report report)
    : options_(std::move(options)), loop_(loop), report_(std::move(report)) {
  thread_ = std::thread([this] { Loop(); });
}

HealthMonitor::~HealthMonitor() {
  *alive_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HealthMonitor::Loop() {
  // NVML's own handle, on this thread (the library counts its users).
  std::unique_ptr<NvmlGpuSource> nvml;
  if (!options_.nvml_library.empty() && !options_.gpus.empty()) {
    Result<std::unique_ptr<NvmlGpuSource>> opened = NvmlGpuSource::Open(options_.nvml_library);
    if (opened.ok()) nvml = std::move(opened).value();
  }
  for (;;) {
    HealthVerdict verdict;
    verdict.unhealthy = DiskTrouble(options_.workdir, options_.min_free_bytes);
    if (!verdict.unhealthy.empty()) verdict.kind = "disk";
    if (verdict.unhealthy.empty() && !options_.program.empty()) {
      verdict.unhealthy = ProgramTrouble(options_.program, options_.timeout);
      if (!verdict.unhealthy.empty()) verdict.kind = "program";
    }
    if (nvml) {
      for (auto& [index, why] : nvml->Health()) {
        if (std::find(options_.gpus.begin(), options_.gpus.end(), index) != options_.gpus.end()) {
          verdict.sick_gpus[static_cast<uint32_t>(index)] = std::move(why);
        }
      }
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      loop_.Post([alive = alive_, report = report_, verdict = std::move(verdict)]() mutable {
        if (*alive) report(std::move(verdict));
      });
      wake_.wait_for(lock, std::chrono::microseconds(options_.interval.count()),
                     [this] { return stop_; });
      if (stop_) return;
    }
  }
}

}  // namespace drover::worker
