// NvidiaSmiGpuSource: the fallback when NVML cannot be loaded — runs
//   nvidia-smi --query-gpu=index,uuid,name,memory.total,utilization.gpu,
//              memory.used --format=csv,noheader,nounits
// directly (no shell), with a deadline, and parses its CSV lines.
//
// Each List()/Sample() starts one process (tens of milliseconds), so it is
// fine for a heartbeat every few seconds but much dearer than NVML.
//
// Thread safety: ParseNvidiaSmiCsv is pure. RunNvidiaSmi and the source may
// be used from any one thread; they start and reap a child process.
#ifndef DROVER_WORKER_RESOURCES_NVIDIA_SMI_H_
#define DROVER_WORKER_RESOURCES_NVIDIA_SMI_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/time.h"
#include "worker/resources/gpu.h"

namespace drover::worker {

// One parsed CSV line: the static part and the live part.
struct NvidiaSmiRow {
  GpuInfo info;
  GpuSample sample;
};

// Parses the CSV output: one line per GPU, six comma-separated fields,
// memory in MiB. "[N/A]" or "[Not Supported]" in the utilization or
// memory.used field reads as nullopt. Blank lines are skipped. DataLoss
// names the line number and quotes the line when it does not fit.
Result<std::vector<NvidiaSmiRow>> ParseNvidiaSmiCsv(std::string_view text);

// Runs `program` (found on PATH unless it contains '/') with the query
// arguments and returns its standard output. Errors:
//   NotFound           the program does not exist (no NVIDIA driver);
//   FailedPrecondition it is not executable, exited non-zero or was killed
//                      by a signal; the message quotes the first line of
//                      its output, e.g. "NVIDIA-SMI has failed because it
//                      couldn't communicate with the NVIDIA driver";
//   DeadlineExceeded   it ran past `timeout`; its process group is killed;
//   ResourceExhausted  it wrote more than 1 MiB;
//   Internal           pipe/spawn/wait failures.
Result<std::string> RunNvidiaSmi(const std::string& program, Duration timeout);

class NvidiaSmiGpuSource final : public GpuSource {
 public:
  NvidiaSmiGpuSource(std::string program, Duration timeout)
      : program_(std::move(program)), timeout_(timeout) {}

  std::string_view name() const override { return "nvidia-smi"; }
  // Runs nvidia-smi and returns the static part; errors as RunNvidiaSmi and
  // ParseNvidiaSmiCsv.
  Result<std::vector<GpuInfo>> List() override;
  // Runs nvidia-smi again; every error is reported as Unavailable.
  Result<std::vector<GpuSample>> Sample() override;

 private:
  Result<std::vector<NvidiaSmiRow>> Query();

  std::string program_;
  Duration timeout_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_NVIDIA_SMI_H_
