// libFuzzer target: the request bodies a client sends that the server reads
// beside a job file: a batch of jobs (POST /api/v1/jobs/batch) and a watch
// message on the event stream (?watch=true) and an allocation queue (POST
// /api/v1/allocs). An accepted batch holds 1 to kMaxBatchJobs answers, and
// each accepted job survives the JSON round trip; an accepted watch names a
// job; an accepted queue is of a known kind with bounded workers and time.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/api_json.h"
#include "proto/job_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto batch = drover::proto::JobSpecBatchFromJson(text);
  if (batch.ok()) {
    if (batch->empty() || batch->size() > drover::proto::kMaxBatchJobs) std::abort();
    for (const auto& spec : *batch) {
      if (!spec.ok()) continue;
      auto again = drover::proto::JobSpecFromJson(drover::proto::JobSpecToJson(*spec));
      if (!again.ok() || !(*again == *spec)) std::abort();
    }
  }
  auto watch = drover::proto::ParseWatchRequest(text);
  if (watch.ok() && watch->job == 0) std::abort();
  auto alloc = drover::proto::ParseAllocQueueRequest(text);
  if (alloc.ok() && (alloc->kind != "slurm" || alloc->max_workers == 0 ||
                     alloc->max_workers > drover::proto::kMaxAllocWorkers ||
                     alloc->time_limit < drover::Seconds(1) ||
                     alloc->time_limit > drover::Seconds(366 * 86400))) {
    std::abort();
  }
  return 0;
}
